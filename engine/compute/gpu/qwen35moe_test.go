package gpu_test

import (
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
)

// TestQwen35MoeFixtureOnGPU runs every qwen35moe-tiny variant all in VRAM (the Gated DeltaNet
// kernels: conv with its state, q/k L2 norm, the delta rule over the prompt and then decode
// steps, the gated norm; gated attention with partial RoPE; the shared expert behind its
// sigmoid gate; 8-bit activations, f16 KV) against transformers under the README's 8-bit
// rule (modeltest.Check8Bit).
func TestQwen35MoeFixtureOnGPU(t *testing.T) {
	dir := fixtures.Path(t, "qwen35moe-tiny")
	b := newGPU(t)
	ref := modeltest.LoadReference(t, dir)
	for name, v := range ref.Variants {
		net := modeltest.Load(t, filepath.Join(dir, v.File), b)
		for _, p := range v.Prompts {
			modeltest.Check8Bit(t, net, dir, p, ref.Tolerances, name)
		}
	}
}
