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
// the float reference path with a float32 cache (reference.json's float_path tolerances:
// max |Δlogit|, router ids identical, router weights, greedy continuation identical) and
// with an f16 cache (its f16_kv_cache bound).
func TestQwen3MoeFloatPathMatchesTransformers(t *testing.T) {
	floatPathMatches(t, "qwen3moe-tiny")
}

// floatPathMatches is the float-path check of every variant of a fixture folder laid out as
// qwen3moe-tiny.
func floatPathMatches(t *testing.T, fixture string) {
	dir := fixtures.Path(t, fixture)
	ref := loadReference(t, dir)
	tol := ref.Tolerances
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
					if lim := tol.FloatPath.HiddenMaxAbs; worst > lim {
						t.Errorf("%s: hidden states differ by %.3g (limit %g)", p.Name, worst, lim)
					}
				}
				dp := modeltest.MaxAbsDiff(pl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)))
				dg := modeltest.MaxAbsDiff(gl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File)))
				t.Logf("%s: max |Δlogit| prompt %.2g, decode %.2g", p.Name, dp, dg)
				if lim := tol.FloatPath.MaxAbsLogit; dp > lim || dg > lim {
					t.Errorf("%s: logits differ by %.3g (prompt) / %.3g (decode), limit %g", p.Name, dp, dg, lim)
				}
				if !slices.Equal(gen, p.Generated) {
					t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
				}
				idFile := p.Files["router_ids"]
				ids := modeltest.ReadI32(t, filepath.Join(dir, idFile.File))
				ws := modeltest.ReadF32(t, filepath.Join(dir, p.Files["router_weights"].File))
				layers, n, k := idFile.Shape[0], idFile.Shape[1], idFile.Shape[2]
				if layers != e.net.H.Layers || n != len(p.Tokens) || k != e.net.H.ExpertsUsed || len(ids) != layers*n*k || len(ws) != len(ids) {
					t.Fatalf("%s: router_ids shape %v does not match the model (%d layers, %d tokens, top %d)", p.Name, idFile.Shape, e.net.H.Layers, len(p.Tokens), e.net.H.ExpertsUsed)
				}
				for l := range layers {
					r := rec.byLayer[l]
					for i := range n * k {
						if r.IDs[i] != ids[l*n*k+i] {
							t.Fatalf("%s: layer %d route %d: expert %d, want %d", p.Name, l, i, r.IDs[i], ids[l*n*k+i])
						}
						if d := math.Abs(float64(r.Weights[i] - ws[l*n*k+i])); d > tol.FloatPath.RouterWeightsMaxAbs {
							t.Errorf("%s: layer %d route %d: weight off by %.3g", p.Name, l, i, d)
						}
					}
				}
				// The same with a float16 cache.
				pl16, gl16, gen16 := e.run(t, p.Tokens, len(p.Generated), "f16", nil)
				d16 := math.Max(modeltest.MaxAbsDiff(pl16, pl), modeltest.MaxAbsDiff(gl16, gl))
				t.Logf("%s: f16 cache moves logits by %.2g", p.Name, d16)
				if lim := tol.F16KV.MaxAbsLogit; d16 > lim {
					t.Errorf("%s: f16 cache moves logits by %.3g (limit %g)", p.Name, d16, lim)
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
	rule := ref.Tolerances.Int8
	// The README's top-1 rule: the argmax must agree where the reference gap is larger than
	// twice the logit tolerance.
	gap := 2 * rule.MaxAbsLogit
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
					if d > rule.MaxAbsLogit {
						over++
					}
					if r < len(margins) && margins[r] > gap && sample.Argmax(got[r*V:(r+1)*V]) != sample.Argmax(want[r*V:(r+1)*V]) {
						t.Errorf("%s: row %d: argmax differs where the reference gap is %.2f", p.Name, r, margins[r])
					}
				}
				for i := range want {
					se += math.Pow(float64(got[i]-want[i]), 2)
					ss += math.Pow(float64(want[i])-mean, 2)
				}
				rel := math.Sqrt(se / ss)
				t.Logf("%s: RMS error / std %.4f, %d of %d rows above %g", p.Name, rel, over, rows, rule.MaxAbsLogit)
				if rel > rule.RMSOverStd {
					t.Errorf("%s: RMS error / std = %.4f (limit %g)", p.Name, rel, rule.RMSOverStd)
				}
				// The README: max |Δ| within the bound on at least 90% of positions.
				if float64(over) > 0.1*float64(rows) {
					t.Errorf("%s: %d of %d rows off by more than %g", p.Name, over, rows, rule.MaxAbsLogit)
				}
				if !slices.Equal(gen, p.Generated) {
					t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
				}
			}
		})
	}
}

// TestQwen3MoeDeterministicAndIncremental: the same prompt twice gives bit-identical logits,
// and evaluating it in one batch agrees with feeding it one token at a time. Both ways are
// held to the reference by the fixture's rules, so they may differ from each other by what
// those rules allow: on the float path (float32 cache) twice the float_path max |Δlogit|;
// on the 8-bit path the int8_activations RMS(Δ)/std rule.
func TestQwen3MoeDeterministicAndIncremental(t *testing.T) {
	deterministicAndIncremental(t, "qwen3moe-tiny")
}

// deterministicAndIncremental: repeated runs are bit-identical and one token at a time
// equals one batch, for every variant of a fixture folder.
func deterministicAndIncremental(t *testing.T, fixture string) {
	dir := fixtures.Path(t, fixture)
	ref := loadReference(t, dir)
	tol := ref.Tolerances
	for _, float := range []bool{true, false} {
		kvType := map[bool]string{true: "f32", false: "f16"}[float]
		for name, v := range ref.Variants {
			e := open(t, filepath.Join(dir, v.File), float)
			p := v.Prompts[len(v.Prompts)-1]
			V := e.net.H.Vocab
			a, _, _ := e.run(t, p.Tokens, 0, kvType, nil)
			b, _, _ := e.run(t, p.Tokens, 0, kvType, nil)
			if d := modeltest.MaxAbsDiff(a, b); d != 0 {
				t.Errorf("%s float=%v: repeated run differs by %g", name, float, d)
			}
			st, err := e.net.NewState(len(p.Tokens), kvType)
			if err != nil {
				t.Fatal(err)
			}
			one := make([]float32, V)
			inc := make([]float32, 0, len(a))
			for _, id := range p.Tokens {
				if err := e.net.Forward(st, []int{id}, false, one, nil); err != nil {
					t.Fatal(err)
				}
				inc = append(inc, one...)
			}
			maxAbs, rel := modeltest.Compare(inc, a)
			t.Logf("%s float=%v: one-at-a-time vs batched: max |Δ| %.3g, RMS/std %.4f", name, float, maxAbs, rel)
			if float && maxAbs > 2*tol.FloatPath.MaxAbsLogit {
				t.Errorf("%s float path: one-at-a-time differs from batched by %.3g (limit 2 x %g)", name, maxAbs, tol.FloatPath.MaxAbsLogit)
			}
			if !float && rel > tol.Int8.RMSOverStd {
				t.Errorf("%s 8-bit path: one-at-a-time vs batched RMS/std %.4f (limit %g)", name, rel, tol.Int8.RMSOverStd)
			}
		}
	}
}
