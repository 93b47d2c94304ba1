package model_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/compute"
	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
	"strata/engine/sample"
)

// The gptoss-tiny README's rules that reference.json states in words only.
const (
	// gptOssGreedyGap: an 8-bit path's continuation may part from the reference from the
	// first greedy step whose top1-top2 gap is below this.
	gptOssGreedyGap = 0.05
	// int8ArgmaxGap: an 8-bit path's argmax must agree where the gap exceeds this.
	int8ArgmaxGap = 0.5
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
// the float path with a float32 cache within 1e-4 (prompt and every decode step), router ids
// identical, weights within 1e-5, the hidden states (where the reference has them) within
// 1e-4, the greedy continuation identical; with an f16 cache within 1e-2 and the same
// continuation.
func TestGptOssFloatPathMatchesTransformers(t *testing.T) {
	dir := fixtures.Path(t, "gptoss-tiny")
	ref := loadReference(t, dir)
	for name, v := range ref.Variants {
		t.Run(name, func(t *testing.T) {
			e := open(t, filepath.Join(dir, v.File), true)
			for _, p := range v.Prompts {
				rec := &hiddenRecorder{routeRecorder: routeRecorder{byLayer: map[int]compute.Routes{}}, stages: map[int][]float32{}}
				pl, gl, gen := e.run(t, p.Tokens, len(p.Generated), "f32", rec)
				if hf, ok := p.Files["hidden"]; ok {
					want := modeltest.ReadF32(t, filepath.Join(dir, hf.File))
					stages, per := hf.Shape[0], hf.Shape[1]*hf.Shape[2]
					if len(rec.stages) != stages || len(want) != stages*per {
						t.Fatalf("%s: %d hidden stages seen, reference %v", p.Name, len(rec.stages), hf.Shape)
					}
					var worst float64
					for st := range stages {
						worst = math.Max(worst, modeltest.MaxAbsDiff(rec.stages[st], want[st*per:(st+1)*per]))
					}
					t.Logf("%s: hidden states within %.2g", p.Name, worst)
					if worst > 1e-4 {
						t.Errorf("%s: hidden states differ by %.3g (limit 1e-4)", p.Name, worst)
					}
				}
				dp := modeltest.MaxAbsDiff(pl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)))
				dg := modeltest.MaxAbsDiff(gl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File)))
				t.Logf("%s: max |Δlogit| prompt %.2g, decode %.2g", p.Name, dp, dg)
				if dp > 1e-4 || dg > 1e-4 {
					t.Errorf("%s: logits differ by %.3g (prompt) / %.3g (decode), limit 1e-4", p.Name, dp, dg)
				}
				if !slices.Equal(gen, p.Generated) {
					t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
				}
				idFile, wFile := p.Files["router_ids"], p.Files["router_weights"]
				ids := modeltest.ReadI32(t, filepath.Join(dir, idFile.File))
				ws := modeltest.ReadF32(t, filepath.Join(dir, wFile.File))
				layers, n, k := idFile.Shape[0], idFile.Shape[1], idFile.Shape[2]
				if layers != e.net.H.Layers || n != len(p.Tokens) || k != e.net.H.ExpertsUsed || len(ids) != layers*n*k {
					t.Fatalf("%s: router_ids shape %v does not match the model (%d layers, %d tokens, top %d)", p.Name, idFile.Shape, e.net.H.Layers, len(p.Tokens), e.net.H.ExpertsUsed)
				}
				for l := range layers {
					r := rec.byLayer[l]
					for i := range n * k {
						if r.IDs[i] != ids[l*n*k+i] {
							t.Fatalf("%s: layer %d route %d: expert %d, want %d", p.Name, l, i, r.IDs[i], ids[l*n*k+i])
						}
						if d := math.Abs(float64(r.Weights[i] - ws[l*n*k+i])); d > 1e-5 {
							t.Errorf("%s: layer %d route %d: weight off by %.3g", p.Name, l, i, d)
						}
					}
				}
				pl16, gl16, gen16 := e.run(t, p.Tokens, len(p.Generated), "f16", nil)
				d16 := math.Max(modeltest.MaxAbsDiff(pl16, pl), modeltest.MaxAbsDiff(gl16, gl))
				t.Logf("%s: f16 cache moves logits by %.2g", p.Name, d16)
				if d16 > 1e-2 {
					t.Errorf("%s: f16 cache moves logits by %.3g (limit 1e-2)", p.Name, d16)
				}
				if !slices.Equal(gen16, p.Generated) {
					t.Errorf("%s: f16 cache greedy tokens %v, want %v", p.Name, gen16, p.Generated)
				}
			}
		})
	}
}

// TestGptOss8BitActivations: the integer path with a float32 cache, fed the reference's own
// continuation, within the 8-bit tolerances (RMS error / std <= 0.03, at most 10% of rows
// off by more than 0.25, the argmax equal where the reference gap exceeds 0.5); its own
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
					if modeltest.MaxAbsDiff(g, w) > 0.25 {
						over++
					}
					if r < len(margins) && margins[r] > int8ArgmaxGap && sample.Argmax(g) != sample.Argmax(w) {
						t.Errorf("%s: row %d: argmax differs where the reference gap is %.2f", p.Name, r, margins[r])
					}
				}
				_, rel := modeltest.Compare(got, want)
				t.Logf("%s: RMS error / std %.4f, %d of %d rows above 0.25", p.Name, rel, over, rows)
				if rel > 0.03 {
					t.Errorf("%s: RMS error / std = %.4f (limit 0.03)", p.Name, rel)
				}
				if float64(over) > 0.1*float64(rows) {
					t.Errorf("%s: %d of %d rows off by more than 0.25", p.Name, over, rows)
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
