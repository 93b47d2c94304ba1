package synth_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
	"strata/engine/synth"
)

// TestHybridSynthLoadsAndRuns: a tiny synthetic qwen35moe and qwen3next, in an
// 8-bit, a k-quant and an i-quant type (IQ3_XXS, the published Qwen3-Next file's), load with the shapes they were written with and run: finite
// logits, and a 70-token prompt (two of the delta rule's blocks) in one batch equals it in two
// batches and, for its first tokens, one token at a time (the recurrent rule).
func TestHybridSynthLoadsAndRuns(t *testing.T) {
	for _, arch := range []string{"qwen35moe", "qwen3next"} {
		for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.IQ3_XXS} {
			s, err := synth.PresetFor(arch, "tiny")
			if err != nil {
				t.Fatal(err)
			}
			s.Quant, s.Pool = typ, 512 // pooled blocks: quantising each K-quant block takes seconds
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.Write(context.Background(), path, s, nil); err != nil {
				t.Fatalf("%s %s: %v", arch, typ, err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			b := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
			net, err := model.Load(f, b, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", arch, typ, err)
			}
			h := net.H
			if h.Arch != arch || h.SSM.VHeads != s.Hybrid.VHeads || h.SSM.KDim != s.Hybrid.KDim || h.SharedFFN != s.Hybrid.SharedFFN ||
				h.RopeDims != s.Hybrid.RopeDims || h.Hybrid.GroupedVHeads != (arch == "qwen3next") {
				t.Errorf("%s %s: read back %+v", arch, typ, h)
			}
			// Longer than one of the delta rule's 64-token blocks, so the batch crosses into a second.
			prompt := make([]int, 70)
			for i := range prompt {
				prompt[i] = (i*131 + 7) % h.Vocab
			}
			st, err := net.NewState(len(prompt), "f32")
			if err != nil {
				t.Fatal(err)
			}
			all := make([]float32, len(prompt)*h.Vocab)
			if err := net.Forward(st, prompt, true, all, nil); err != nil {
				t.Fatalf("%s %s: %v", arch, typ, err)
			}
			for _, v := range all {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s %s: logit %v", arch, typ, v)
				}
			}
			// The same prompt as two batches (the state carried between them), and its first
			// tokens one at a time (the recurrent rule).
			st2, _ := net.NewState(len(prompt), "f32")
			split := make([]float32, len(prompt)*h.Vocab)
			cut := 40
			if err := net.Forward(st2, prompt[:cut], true, split, nil); err != nil {
				t.Fatal(err)
			}
			if err := net.Forward(st2, prompt[cut:], true, split[cut*h.Vocab:], nil); err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(split, all); d > 1e-3 {
				t.Errorf("%s %s: two batches differ from one by %.3g", arch, typ, d)
			}
			st3, _ := net.NewState(len(prompt), "f32")
			one := make([]float32, h.Vocab)
			for i, id := range prompt[:8] {
				if err := net.Forward(st3, []int{id}, false, one, nil); err != nil {
					t.Fatal(err)
				}
				if d := maxAbsDiff(one, all[i*h.Vocab:(i+1)*h.Vocab]); d > 1e-3 {
					t.Errorf("%s %s: token %d alone differs from the batch by %.3g", arch, typ, i, d)
				}
			}
			b.Close()
			f.Close()
		}
	}
}

// TestHybridPresets: the published shapes have the published parameter counts (Qwen3.5-35B-A3B's
// text model 34.7 B, Qwen3-Next-80B-A3B 79.7 B without its MTP layer) and validate.
func TestHybridPresets(t *testing.T) {
	for _, c := range []struct {
		arch, preset string
		lo, hi       float64
	}{{"qwen35moe", "qwen35-35b-a3b", 34e9, 35.5e9}, {"qwen3next", "qwen3next-80b-a3b", 79e9, 81e9}} {
		s, err := synth.PresetFor(c.arch, c.preset)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", c.preset, err)
		}
		for _, typ := range []quant.Type{quant.IQ3_XXS, quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_S} {
			s.Quant = typ
			if err := s.Validate(); err != nil {
				t.Errorf("%s in %s: %v", c.preset, typ, err)
			}
		}
		if p := float64(synth.Parameters(s)); p < c.lo || p > c.hi {
			t.Errorf("%s: %.3g parameters, want %.3g..%.3g", c.preset, p, c.lo, c.hi)
		}
	}
	if _, err := synth.PresetFor("qwen35moe", "qwen3next-80b-a3b"); err == nil {
		t.Error("a qwen3next preset for qwen35moe gave no error")
	}
	s, _ := synth.PresetFor("qwen35moe", "tiny")
	s.Hybrid.VHeads = 3
	if err := s.Validate(); err == nil {
		t.Error("3 value heads over 2 key heads validated")
	}
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}
