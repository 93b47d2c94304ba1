package model_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
	"strata/engine/sample"
)

// TestInt8KVCacheMatchesF16 runs every variant and prompt of each fixture model with an int8
// KV cache and with the f16 one, the int8 run fed the f16 run's greedy tokens so every
// prompt position and decode step compares like for like. The bound is the fixture's 8-bit
// rule (reference.json's int8_activations: RMS(Δ)/std per prompt, max |Δ| on at least 90% of
// rows) and its top-1 rule: wherever the f16 run's top1-top2 gap is more than twice the
// logit bound, the argmax agrees, and the greedy continuation on the int8 cache's own logits
// is the same up to the first step where that gap is smaller.
//
// On the float path (dequantised weights, float32 maths) the cache is the only difference
// and every prompt is held to the rule. On the fast path (8-bit activations) the rule holds
// for every prompt whose expert choices (prompt pass and decode steps) both caches make alike;
// where one flips at a near-tie the rows after it move by up to 2.4 (gptoss-tiny's mxfp4 p1
// and p3 in the shared set, whose p3 flips with an f16 cache against a float32 one too: see
// TestGptOss8BitActivations), and only the top-1 rule is held.
func TestInt8KVCacheMatchesF16(t *testing.T) {
	for _, fixture := range []string{"qwen3moe-tiny", "gptoss-tiny", "qwen35moe-tiny"} {
		t.Run(fixture, func(t *testing.T) {
			dir := fixtures.Path(t, fixture)
			ref := loadReference(t, dir)
			for name, v := range ref.Variants {
				for _, float := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s/float=%v", name, float), func(t *testing.T) {
						int8CacheVariant(t, dir, v, ref.Tolerances.Int8.RMSOverStd, ref.Tolerances.Int8.MaxAbsLogit, float)
					})
				}
			}
		})
	}
}

func int8CacheVariant(t *testing.T, dir string, v fixtures.RefVariant, rmsOverStd, maxAbsLogit float64, float bool) {
	gap := 2 * maxAbsLogit
	e := open(t, filepath.Join(dir, v.File), float)
	V := e.net.H.Vocab
	for _, p := range v.Prompts {
		_, gl16, gen16 := e.run(t, p.Tokens, len(p.Generated), "f16", nil)
		want, ids16 := modeltest.ForcedRoutes(t, e.net, p.Tokens, gen16, "f16")
		got, ids8 := modeltest.ForcedRoutes(t, e.net, p.Tokens, gen16, "int8")
		flips := 0
		for i, id := range ids16 {
			if ids8[i] != id {
				flips++
			}
		}
		maxAbs, rel := modeltest.Compare(got, want)
		rows, over := len(want)/V, 0
		for r := range rows {
			g, w := got[r*V:(r+1)*V], want[r*V:(r+1)*V]
			if modeltest.MaxAbsDiff(g, w) > maxAbsLogit {
				over++
			}
			if m := modeltest.Margin(w); m > gap && sample.Argmax(g) != sample.Argmax(w) {
				t.Errorf("%s: row %d: int8 cache's argmax differs where the f16 run's gap is %.2f", p.Name, r, m)
			}
		}
		t.Logf("%s: int8 vs f16 cache: RMS/std %.4f, max |Δ| %.3g, %d of %d rows above %g, %d expert choices flipped", p.Name, rel, maxAbs, over, rows, maxAbsLogit, flips)
		if flips > 0 && !float {
			continue
		}
		if rel > rmsOverStd {
			t.Errorf("%s: int8 cache: RMS error / std = %.4f (limit %g)", p.Name, rel, rmsOverStd)
		}
		if float64(over) > 0.1*float64(rows) {
			t.Errorf("%s: int8 cache: %d of %d rows off by more than %g", p.Name, over, rows, maxAbsLogit)
		}
		// Greedy on its own logits: the same tokens up to the first step with a small gap.
		_, _, gen8 := e.run(t, p.Tokens, len(gen16), "int8", nil)
		for s := range gen16 {
			if m := modeltest.Margin(gl16[s*V : (s+1)*V]); m <= gap {
				break
			}
			if gen8[s] != gen16[s] {
				t.Errorf("%s: int8 cache's greedy step %d: token %d, f16's %d", p.Name, s, gen8[s], gen16[s])
				break
			}
		}
	}
}
