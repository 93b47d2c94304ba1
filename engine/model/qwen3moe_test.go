package model_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/fixtures"
	"strata/engine/model"
	"strata/engine/model/modeltest"
	"strata/engine/sample"
)

func loadReference(t *testing.T, dir string) modeltest.Reference {
	return modeltest.LoadReference(t, dir)
}

// routeRecorder keeps every layer's routes of one forward pass.
type routeRecorder struct{ byLayer map[int]compute.Routes }

func (r *routeRecorder) Routes(layer int, rt compute.Routes) { r.byLayer[layer] = rt }

type engineUnderTest struct {
	net *model.Model
}

func open(t *testing.T, path string, float bool) engineUnderTest {
	t.Helper()
	b := cpu.New(cpu.Options{Threads: 2, FloatPath: float})
	t.Cleanup(func() { b.Close() })
	return engineUnderTest{net: modeltest.Load(t, path, b)}
}

func (e engineUnderTest) run(t *testing.T, prompt []int, n int, kvType string, obs model.Observer) (promptLogits, genLogits []float32, gen []int) {
	t.Helper()
	return modeltest.Greedy(t, e.net, prompt, n, kvType, obs)
}

// TestQwen3MoeFloatPathMatchesTransformers: every variant, every prompt, every position, on
// the float reference path with a float32 cache (max |Δlogit| <= 1e-4, router ids identical,
// weights within 1e-5, greedy continuation identical) and with an f16 cache (<= 1e-2).
func TestQwen3MoeFloatPathMatchesTransformers(t *testing.T) {
	floatPathMatches(t, "qwen3moe-tiny")
}

// floatPathMatches is the float-path check of every variant of a fixture folder laid out as
// qwen3moe-tiny.
func floatPathMatches(t *testing.T, fixture string) {
	dir := fixtures.Path(t, fixture)
	ref := loadReference(t, dir)
	for name, v := range ref.Variants {
		t.Run(name, func(t *testing.T) {
			e := open(t, filepath.Join(dir, v.File), true)
			for _, p := range v.Prompts {
				rec := &routeRecorder{byLayer: map[int]compute.Routes{}}
				pl, gl, gen := e.run(t, p.Tokens, len(p.Generated), "f32", rec)
				dp := modeltest.MaxAbsDiff(pl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)))
				dg := modeltest.MaxAbsDiff(gl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File)))
				t.Logf("%s: max |Δlogit| prompt %.2g, decode %.2g", p.Name, dp, dg)
				if dp > 1e-4 || dg > 1e-4 {
					t.Errorf("%s: logits differ by %.3g (prompt) / %.3g (decode), limit 1e-4", p.Name, dp, dg)
				}
				if !slices.Equal(gen, p.Generated) {
					t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
				}
				ids := modeltest.ReadI32(t, filepath.Join(dir, p.Files["router_ids"].File))
				ws := modeltest.ReadF32(t, filepath.Join(dir, p.Files["router_weights"].File))
				k := p.Files["router_ids"].Shape[2]
				n := len(p.Tokens)
				for l := range e.net.H.Layers {
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
				// The same with a float16 cache.
				pl16, gl16, gen16 := e.run(t, p.Tokens, len(p.Generated), "f16", nil)
				d16 := math.Max(modeltest.MaxAbsDiff(pl16, pl), modeltest.MaxAbsDiff(gl16, gl))
				t.Logf("%s: f16 cache moves logits by %.2g", p.Name, d16)
				if d := d16; d > 1e-2 {
					t.Errorf("%s: f16 cache moves logits by %.3g (limit 1e-2)", p.Name, d)
				}
				if !slices.Equal(gen16, p.Generated) {
					t.Errorf("%s: f16 cache greedy tokens %v, want %v", p.Name, gen16, p.Generated)
				}
			}
		})
	}
}

// TestQwen3Moe8BitActivations checks the fast path (activations quantised to 8 bits, integer
// dot products) against the references under the fixture's int8 tolerances.
func TestQwen3Moe8BitActivations(t *testing.T) {
	int8PathMatches(t, "qwen3moe-tiny")
}

// int8PathMatches is the 8-bit-activation check of every variant of a fixture folder laid out
// as qwen3moe-tiny.
func int8PathMatches(t *testing.T, fixture string) {
	dir := fixtures.Path(t, fixture)
	ref := loadReference(t, dir)
	for name, v := range ref.Variants {
		t.Run(name, func(t *testing.T) {
			e := open(t, filepath.Join(dir, v.File), false)
			for _, p := range v.Prompts {
				pl, gl, gen := e.run(t, p.Tokens, len(p.Generated), "f16", nil)
				V := e.net.H.Vocab
				want := append(modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)), modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File))...)
				got := append(pl, gl...)
				margins := append(append([]float64(nil), p.Margins.Prompt...), p.Margins.Greedy...)
				var se, ss, mean float64
				for _, x := range want {
					mean += float64(x)
				}
				mean /= float64(len(want))
				over := 0
				rows := len(want) / V
				for r := range rows {
					d := modeltest.MaxAbsDiff(got[r*V:(r+1)*V], want[r*V:(r+1)*V])
					if d > 0.25 {
						over++
					}
					if r < len(margins) && margins[r] > 0.5 && sample.Argmax(got[r*V:(r+1)*V]) != sample.Argmax(want[r*V:(r+1)*V]) {
						t.Errorf("%s: row %d: argmax differs where the reference gap is %.2f", p.Name, r, margins[r])
					}
				}
				for i := range want {
					se += math.Pow(float64(got[i]-want[i]), 2)
					ss += math.Pow(float64(want[i])-mean, 2)
				}
				rel := math.Sqrt(se / ss)
				t.Logf("%s: RMS error / std %.4f, %d of %d rows above 0.25", p.Name, rel, over, rows)
				if rel > 0.03 {
					t.Errorf("%s: RMS error / std = %.4f (limit 0.03)", p.Name, rel)
				}
				if float64(over) > 0.1*float64(rows) {
					t.Errorf("%s: %d of %d rows off by more than 0.25", p.Name, over, rows)
				}
				if !slices.Equal(gen, p.Generated) {
					t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
				}
			}
		})
	}
}

// TestQwen3MoeDeterministicAndIncremental: the same prompt twice gives bit-identical logits,
// and evaluating it in one batch equals feeding it one token at a time.
func TestQwen3MoeDeterministicAndIncremental(t *testing.T) {
	deterministicAndIncremental(t, "qwen3moe-tiny")
}

// deterministicAndIncremental: repeated runs are bit-identical and one token at a time
// equals one batch, for every variant of a fixture folder.
func deterministicAndIncremental(t *testing.T, fixture string) {
	dir := fixtures.Path(t, fixture)
	ref := loadReference(t, dir)
	for _, float := range []bool{true, false} {
		for name, v := range ref.Variants {
			e := open(t, filepath.Join(dir, v.File), float)
			p := v.Prompts[len(v.Prompts)-1]
			V := e.net.H.Vocab
			a, _, _ := e.run(t, p.Tokens, 0, "f16", nil)
			b, _, _ := e.run(t, p.Tokens, 0, "f16", nil)
			if d := modeltest.MaxAbsDiff(a, b); d != 0 {
				t.Errorf("%s float=%v: repeated run differs by %g", name, float, d)
			}
			st, err := e.net.NewState(len(p.Tokens), "f16")
			if err != nil {
				t.Fatal(err)
			}
			one := make([]float32, V)
			var worst float64
			for i, id := range p.Tokens {
				if err := e.net.Forward(st, []int{id}, false, one, nil); err != nil {
					t.Fatal(err)
				}
				worst = math.Max(worst, modeltest.MaxAbsDiff(one, a[i*V:(i+1)*V]))
			}
			if worst > 1e-3 {
				t.Errorf("%s float=%v: one-at-a-time differs from batched by %.3g", name, float, worst)
			}
		}
	}
}
