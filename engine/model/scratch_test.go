package model_test

import (
	"context"
	"path/filepath"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
	"strata/engine/synth"
)

// countingBackend is the CPU backend counting the floats of the buffers it hands out.
type countingBackend struct {
	*cpu.Backend
	floats int
}

func (c *countingBackend) NewBuf(n int) compute.Buf {
	c.floats += n
	return c.Backend.NewBuf(n)
}

// TestScratchFloatsIsWhatAPassTakes: the planner sizes the GPU's activations from
// Hparams.ScratchFloats, so it must be exactly what a first forward pass of n tokens
// allocates (scratch and one row of logits), for every architecture.
func TestScratchFloatsIsWhatAPassTakes(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "gpt-oss", "qwen35moe", "qwen3next"} {
		s, err := synth.PresetFor(arch, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		s.Quant, s.Pool = quant.Q8_0, 64
		path := filepath.Join(t.TempDir(), arch+".gguf")
		if err := synth.Write(context.Background(), path, s, nil); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		b := &countingBackend{Backend: cpu.New(cpu.Options{Threads: 2})}
		net, err := model.Load(f, b, nil)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		for _, n := range []int{1, 7} {
			st, err := net.NewState(16, "f16")
			if err != nil {
				t.Fatal(err)
			}
			tokens := make([]int, n)
			for i := range tokens {
				tokens[i] = (i*31 + 3) % net.H.Vocab
			}
			b.floats = 0
			if err := net.Forward(st, tokens, false, make([]float32, net.H.Vocab), nil); err != nil {
				t.Fatalf("%s: %v", arch, err)
			}
			if want := net.H.ScratchFloats(n); b.floats != want {
				t.Errorf("%s, %d tokens: the pass allocated %d floats, ScratchFloats says %d", arch, n, b.floats, want)
			}
		}
		b.Close()
		f.Close()
	}
}
