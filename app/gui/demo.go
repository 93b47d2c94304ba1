package gui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"strata/engine/quant"
	"strata/engine/synth"
)

// demoFile is the demo model's name inside the demo folder.
const demoFile = "strata-demo-q8_0.gguf"

// demoSpec is the demo model: the synth "tiny" preset with more layers and experts than
// the bare preset so the tier map has something to show, and a Zipf skew so some experts
// are routed far more than others, as in a trained model. Its weights are random: its
// answers are noise.
func demoSpec() (synth.Spec, error) {
	s, err := synth.Preset("tiny")
	if err != nil {
		return s, err
	}
	s.Name = "Strata demo (random weights)"
	s.Layers, s.Experts, s.ExpertsUsed = 8, 32, 4
	s.Quant = quant.Q8_0
	s.Zipf = 1.1
	return s, s.Validate()
}

// makeDemo writes the demo model into dir once and returns its path. synth.Write goes
// through a temporary file and renames it, so an interrupted run leaves no half model for
// the next start to trust.
func makeDemo(ctx context.Context, dir string, progress func(done, total int64)) (string, error) {
	path := filepath.Join(dir, demoFile)
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return path, nil
	}
	spec, err := demoSpec()
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo folder %s: %w", dir, err)
	}
	if err := synth.Write(ctx, path, spec, progress); err != nil {
		return "", fmt.Errorf("demo model %s: %w", path, err)
	}
	return path, nil
}
