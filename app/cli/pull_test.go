package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/app/library/hubtest"
)

// TestPullCommand: `strata pull` against a stand-in Hub (HF_ENDPOINT) downloads a split
// model by quantisation name into -o DIR or the app's models folder, resumes a dropped
// connection, and explains a gated or missing repository.
func TestPullCommand(t *testing.T) {
	files := hubtest.SplitModel(t)
	hub, srv := hubtest.New(t, map[string]map[string][]byte{"strata/tiny-GGUF": files, "strata/gated-GGUF": files}, "strata/gated-GGUF")
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)

	hub.SetCuts(5000)
	dir := filepath.Join(t.TempDir(), "m")
	code, out, errs := runCLI(t, "pull", "strata/tiny-GGUF:q8_0", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	first := filepath.Join(dir, "tiny-Q8_0-00001-of-00003.gguf")
	if strings.TrimSpace(out) != first || !strings.Contains(errs, "in 3 parts") || !strings.Contains(errs, "SHA-256 checked") {
		t.Errorf("stdout %q stderr %q", out, errs)
	}
	for name, b := range files {
		if !strings.HasSuffix(name, ".gguf") {
			continue
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if r := hub.Ranges(); len(r) != 4 || r[1] != "bytes=5000-" {
		t.Errorf("requests %q: want the first part resumed at 5000", r)
	}

	// No -o: the app's models folder.
	code, out, errs = runCLI(t, "pull", "strata/tiny-GGUF")
	want := filepath.Join(data, "strata", "models", "tiny-Q8_0-00001-of-00003.gguf")
	if code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("default folder: exit %d, stdout %q, want %s: %s", code, out, want, errs)
	}

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"pull", "strata/gated-GGUF", "-o", dir}, 1, "HF_TOKEN"},
		{[]string{"pull", "strata/none-GGUF", "-o", dir}, 1, "not found"},
		{[]string{"pull", "strata/tiny-GGUF:IQ1_S", "-o", dir}, 1, "no GGUF model matching"},
		{[]string{"pull", "tiny", "-o", dir}, 2, "owner/name"},
		{[]string{"pull"}, 2, "REPO[:FILE]"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.says)
		}
	}
}
