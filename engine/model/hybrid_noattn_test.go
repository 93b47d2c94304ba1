package model_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/model/modeltest"
	"strata/engine/quant"
	"strata/engine/synth"
)

// TestHybridWithoutAttentionLayers: a hybrid with fewer layers than its
// full_attention_interval has Gated DeltaNet layers only (llama.cpp reads it the same way);
// it loads, and on the float path a prompt in one batch (the chunked rule) gives the logits
// of the same prompt token by token (the recurrent rule) and repeats bit for bit.
func TestHybridWithoutAttentionLayers(t *testing.T) {
	for _, c := range []struct {
		arch   string
		layers int
	}{{"qwen3next", 1}, {"qwen35moe", 2}} {
		arch, layers := c.arch, c.layers
		t.Run(fmt.Sprintf("%s/layers=%d", arch, layers), func(t *testing.T) {
			s, err := synth.PresetFor(arch, "tiny")
			if err != nil {
				t.Fatal(err)
			}
			if layers >= s.Hybrid.AttnEvery {
				t.Fatalf("the tiny preset's interval %d is not above %d layers", s.Hybrid.AttnEvery, layers)
			}
			s.Layers, s.Quant, s.Pool = layers, quant.Q8_0, 64
			path := filepath.Join(t.TempDir(), arch+".gguf")
			if err := synth.Write(context.Background(), path, s, nil); err != nil {
				t.Fatal(err)
			}
			e := open(t, path, true)
			if want := slices.Repeat([]bool{true}, layers); !slices.Equal(e.net.H.Recurrent, want) {
				t.Fatalf("recurrent layers %v, want %v", e.net.H.Recurrent, want)
			}
			prompt := make([]int, 70) // longer than the CPU's 64-token chunk
			for i := range prompt {
				prompt[i] = (i*37 + 11) % s.Vocab
			}
			a, _, _ := e.run(t, prompt, 0, "f32", nil)
			b, _, _ := e.run(t, prompt, 0, "f32", nil)
			if d := modeltest.MaxAbsDiff(a, b); d != 0 {
				t.Errorf("a repeated run differs by %g", d)
			}
			st, err := e.net.NewState(len(prompt), "f32")
			if err != nil {
				t.Fatal(err)
			}
			one := make([]float32, s.Vocab)
			var inc []float32
			for _, id := range prompt {
				if err := e.net.Forward(st, []int{id}, false, one, nil); err != nil {
					t.Fatal(err)
				}
				inc = append(inc, one...)
			}
			if d := modeltest.MaxAbsDiff(inc, a); !(d <= 1e-3) {
				t.Errorf("token by token differs from one batch by %.3g (limit 1e-3)", d)
			}
		})
	}
}
