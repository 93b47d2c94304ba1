package gpu_test

import (
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
)

// TestGptOssFixtureOnGPU runs every gptoss-tiny variant all in VRAM (sinks, sliding windows
// on ring layers, YaRN, biases, clamped SwiGLU, MXFP4 experts; 8-bit activations, f16 KV)
// against transformers under the README's 8-bit rule (modeltest.Check8Bit).
func TestGptOssFixtureOnGPU(t *testing.T) {
	dir := fixtures.Path(t, "gptoss-tiny")
	b := newGPU(t)
	ref := modeltest.LoadReference(t, dir)
	for name, v := range ref.Variants {
		net := modeltest.Load(t, filepath.Join(dir, v.File), b)
		for _, p := range v.Prompts {
			modeltest.Check8Bit(t, net, dir, p, ref.Tolerances, name)
		}
	}
}
