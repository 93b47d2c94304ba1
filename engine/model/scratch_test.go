package model_test

import (
	"context"
	"math"
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

// loadCountingTiny writes arch's tiny synth preset in Q8_0 and loads it on a CPU backend
// that counts the floats each buffer takes; both are closed when the test ends.
func loadCountingTiny(t *testing.T, arch string) (*model.Model, *countingBackend) {
	t.Helper()
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
	t.Cleanup(func() { f.Close() })
	b := &countingBackend{Backend: cpu.New(cpu.Options{Threads: 2})}
	t.Cleanup(func() { b.Close() })
	net, err := model.Load(f, b, nil)
	if err != nil {
		t.Fatalf("%s: %v", arch, err)
	}
	return net, b
}

// TestScratchFloatsIsWhatAPassTakes: the planner sizes the GPU's activations from
// Hparams.ScratchFloats, so it must be exactly what a first forward pass of n tokens
// allocates (scratch and one row of logits), for every architecture.
func TestScratchFloatsIsWhatAPassTakes(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "gpt-oss", "qwen35moe", "qwen3next"} {
		net, b := loadCountingTiny(t, arch)
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
	}
}

// TestAllLogitsStayInTheReservedScratch: once ReserveScratch has sized a state for passes
// of n tokens (what the plan counts, ScratchFloats(n)), a pass that wants every row's
// logits (strata eval) allocates nothing more: it computes them in chunks of the reserved
// row instead of a rows x vocab buffer (which on a GPU under --vram-budget-mib failed with
// "activations: ... would exceed the VRAM budget"). The chunked logits are those of one
// batched product, row for row.
func TestAllLogitsStayInTheReservedScratch(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "gpt-oss", "qwen35moe"} {
		net, b := loadCountingTiny(t, arch)
		const n = 7
		tokens := make([]int, n)
		for i := range tokens {
			tokens[i] = (i*31 + 3) % net.H.Vocab
		}
		free, err := net.NewState(16, "f16")
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n*net.H.Vocab)
		if err := net.Forward(free, tokens, true, want, nil); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		st, err := net.NewState(16, "f16")
		if err != nil {
			t.Fatal(err)
		}
		b.floats = 0
		net.ReserveScratch(st, n)
		if reserved := net.H.ScratchFloats(n); b.floats != reserved {
			t.Fatalf("%s: ReserveScratch(%d) allocated %d floats, ScratchFloats says %d", arch, n, b.floats, reserved)
		}
		b.floats = 0
		got := make([]float32, n*net.H.Vocab)
		if err := net.Forward(st, tokens, true, got, nil); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if b.floats != 0 {
			t.Errorf("%s: an all-logits pass of %d tokens allocated %d floats past the reserved scratch (%d rows of logits)", arch, n, b.floats, b.floats/net.H.Vocab)
		}
		var worst, scale float64
		for i := range want {
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
			scale = max(scale, math.Abs(float64(want[i])))
		}
		if worst > 1e-5*scale {
			t.Errorf("%s: chunked logits differ from one batched product by %g (largest logit %g)", arch, worst, scale)
		}
	}
}
