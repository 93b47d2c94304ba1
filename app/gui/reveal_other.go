//go:build !windows

package gui

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// errNoReveal says the OS has no file manager command Strata knows (Windows always has
// Explorer).
var errNoReveal = errors.New("no file manager to show the file in")

// revealFile opens the file manager on the file's folder (macOS selects the file).
func revealFile(path string) error {
	var cmd *exec.Cmd
	switch {
	case runtime.GOOS == "darwin":
		cmd = exec.Command("open", "-R", path)
	default:
		if _, err := exec.LookPath("xdg-open"); err != nil {
			return fmt.Errorf("%w: xdg-open is not installed (the file is %s)", errNoReveal, path)
		}
		cmd = exec.Command("xdg-open", filepath.Dir(path))
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it
	return nil
}
