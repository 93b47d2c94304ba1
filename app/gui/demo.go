package gui

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// demoFile is the demo model's name inside the demo folder.
const demoFile = "strata-demo-tiny-q8_0.gguf"

// makeDemo writes the tiny synthetic demo model into dir once and returns its path. It
// runs this executable's `synth` subcommand (the same code as `strata synth`), so the GUI
// needs no second copy of the generator; the file is written under a temporary name and
// renamed, so an interrupted run leaves no half model behind.
func makeDemo(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, demoFile)
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo folder %s: %w", dir, err)
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding strata's executable: %w", err)
	}
	tmp := path + ".partial"
	cmd := exec.CommandContext(ctx, self, "synth", "--arch", "qwen3moe", "--preset", "tiny", "--quant", "q8_0", "-o", tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("strata synth: %w: %s", err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("demo model %s: %w", path, err)
	}
	return path, nil
}
