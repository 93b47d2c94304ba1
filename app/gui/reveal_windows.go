package gui

import (
	"os/exec"
	"syscall"
)

// revealFile opens Explorer on the file's folder with the file selected.
func revealFile(path string) error {
	cmd := exec.Command("explorer.exe")
	// Explorer parses its own command line: /select,"PATH" must reach it unquoted as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{CmdLine: `explorer.exe /select,"` + path + `"`}
	return cmd.Start() // Explorer's exit status is 1 even when it worked
}
