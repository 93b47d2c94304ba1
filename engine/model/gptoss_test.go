package model_test

import (
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
	"strata/engine/sample"
)

// The gptoss-tiny README's rules that reference.json states in words only.
const (
	// gptOssGreedyGap: an 8-bit path's continuation may part from the reference from the
	// first greedy step whose top1-top2 gap is below this.
	gptOssGreedyGap = 0.05
)

// hiddenRecorder keeps the routes and the hidden states of the first pass it sees.
type hiddenRecorder struct {
	routeRecorder
	stages map[int][]float32
}

func (r *hiddenRecorder) Hidden(stage int, x []float32) {
	if _, ok := r.stages[stage]; !ok {
		r.stages[stage] = x
	}
}

// TestGptOssFloatPathMatchesTransformers: every variant x prompt x position of gptoss-tiny on
// the float path, as for qwen3moe (floatPathMatches): logits, routes, hidden states and the
// greedy continuation within reference.json's float-path bounds, and with an f16 cache.
func TestGptOssFloatPathMatchesTransformers(t *testing.T) {
	floatPathMatches(t, "gptoss-tiny")
}

// TestGptOss8BitActivations: the integer path with a float32 cache, fed the reference's own
// continuation, within reference.json's 8-bit rule (RMS error / std, at most 10% of rows off
// by more than its max |Δlogit|, the argmax equal where the reference gap exceeds twice that,
// as the qwen3moe test reads the README's top-1 rule); its own
// greedy continuation equals the reference's up to the first step where the reference gap
// falls below gptOssGreedyGap. The cache is float32 so the test measures the 8-bit
// activations alone: with an f16 cache on top, p3 of the shared set flips a near-tie expert
// (layer 2, position 8) and that row moves by 2.3, past the RMS bound (the float path's f16
// test covers the f16 cache).
func TestGptOss8BitActivations(t *testing.T) {
	dir := fixtures.Path(t, "gptoss-tiny")
	ref := loadReference(t, dir)
	for name, v := range ref.Variants {
		t.Run(name, func(t *testing.T) {
			e := open(t, filepath.Join(dir, v.File), false)
			V := e.net.H.Vocab
			rule := ref.Tolerances.Int8
			for _, p := range v.Prompts {
				pl, sl := modeltest.Forced(t, e.net, p.Tokens, p.Generated, "f32")
				want := append(modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)), modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File))...)
				got := append(pl, sl...)
				if len(got) != len(want) {
					t.Fatalf("%s: %d logits, reference has %d", p.Name, len(got), len(want))
				}
				margins := append(append([]float64(nil), p.Margins.Prompt...), p.Margins.Greedy...)
				rows, over := len(want)/V, 0
				for r := range rows {
					g, w := got[r*V:(r+1)*V], want[r*V:(r+1)*V]
					if modeltest.MaxAbsDiff(g, w) > rule.MaxAbsLogit {
						over++
					}
					if r < len(margins) && margins[r] > 2*rule.MaxAbsLogit && sample.Argmax(g) != sample.Argmax(w) {
						t.Errorf("%s: row %d: argmax differs where the reference gap is %.2f", p.Name, r, margins[r])
					}
				}
				_, rel := modeltest.Compare(got, want)
				t.Logf("%s: RMS error / std %.4f, %d of %d rows above %g", p.Name, rel, over, rows, rule.MaxAbsLogit)
				if rel > rule.RMSOverStd {
					t.Errorf("%s: RMS error / std = %.4f (limit %g)", p.Name, rel, rule.RMSOverStd)
				}
				if float64(over) > 0.1*float64(rows) {
					t.Errorf("%s: %d of %d rows off by more than %g", p.Name, over, rows, rule.MaxAbsLogit)
				}
				_, _, gen := e.run(t, p.Tokens, len(p.Generated), "f32", nil)
				for s := range gen {
					if s < len(p.Margins.Greedy) && p.Margins.Greedy[s] < gptOssGreedyGap {
						t.Logf("%s: continuation compared up to step %d (reference gap %.3f there)", p.Name, s, p.Margins.Greedy[s])
						break
					}
					if gen[s] != p.Generated[s] {
						t.Errorf("%s: greedy token %d is %d, want %d (reference gap %.3f)", p.Name, s, gen[s], p.Generated[s], p.Margins.Greedy[s])
						break
					}
				}
			}
		})
	}
}
