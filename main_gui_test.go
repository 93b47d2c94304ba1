//go:build !nogui

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoToolkitNoiseUnderCUTF8 starts this test binary again (it links the GUI toolkit as
// strata does) under LANG=C.UTF-8 and expects nothing from Fyne on stderr: the toolkit reads
// the locale while it initialises, before any headless command runs.
func TestNoToolkitNoiseUnderCUTF8(t *testing.T) {
	for _, env := range []string{"LANG=C.UTF-8", "LC_ALL=C.utf8", "LANG=POSIX.UTF-8"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(withoutLocale(os.Environ()), env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", env, err, out)
		}
		if strings.Contains(string(out), "Fyne error") {
			t.Errorf("%s: the toolkit printed\n%s", env, out)
		}
	}
}

// withoutLocale drops the locale variables, so each case sets exactly one.
func withoutLocale(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES":
			continue
		}
		out = append(out, kv)
	}
	return out
}
