package modeltest

import (
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/model"
	"strata/engine/sample"
)

// The gptoss-tiny README's rules for 8-bit paths that reference.json states in words only.
const (
	// GptOssArgmaxGap: an 8-bit path's argmax must agree where the reference gap exceeds this.
	GptOssArgmaxGap = 0.5
	// GptOssRowsOver: the share of rows allowed past the 8-bit max_abs_logit (near-tie
	// expert flips).
	GptOssRowsOver = 0.10
	// GptOssGreedyGap: the greedy continuation may part from the reference from the first
	// step whose top1-top2 gap is below this (as on the CPU's 8-bit path).
	GptOssGreedyGap = 0.05
)

// CheckGptOss8Bit holds net (an 8-bit path: 8-bit activations, f16 KV) to prompt p of a
// gptoss-tiny variant in folder dir under the README's 8-bit rule: fed the reference
// continuation, the logits within the RMS/std bound with at most GptOssRowsOver of the rows
// past max_abs_logit and the argmax equal wherever the reference gap exceeds
// GptOssArgmaxGap; its own greedy continuation equal up to the first near tie.
func CheckGptOss8Bit(t testing.TB, net *model.Model, dir string, p fixtures.RefPrompt, rule fixtures.Tolerances, label string) {
	t.Helper()
	V := net.H.Vocab
	pl, sl := Forced(t, net, p.Tokens, p.Generated, "f16")
	want := append(ReadF32(t, filepath.Join(dir, p.Files["logits"].File)), ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File))...)
	got := append(pl, sl...)
	if len(got) != len(want) {
		t.Fatalf("%s %s: %d logits, reference has %d", label, p.Name, len(got), len(want))
	}
	margins := append(append([]float64(nil), p.Margins.Prompt...), p.Margins.Greedy...)
	lim := rule.Int8
	rows, over := len(want)/V, 0
	for r := range rows {
		g, w := got[r*V:(r+1)*V], want[r*V:(r+1)*V]
		if MaxAbsDiff(g, w) > lim.MaxAbsLogit {
			over++
		}
		if r < len(margins) && margins[r] > GptOssArgmaxGap && sample.Argmax(g) != sample.Argmax(w) {
			t.Errorf("%s %s: row %d: argmax differs where the reference gap is %.2f", label, p.Name, r, margins[r])
		}
	}
	maxAbs, rel := Compare(got, want)
	t.Logf("%s %s: max |Δlogit| %.3g, RMS/std %.4f, %d of %d rows above %.2g", label, p.Name, maxAbs, rel, over, rows, lim.MaxAbsLogit)
	if rel > lim.RMSOverStd || float64(over) > GptOssRowsOver*float64(rows) {
		t.Errorf("%s %s: logits off: RMS/std %.4f (limit %.2g), %d of %d rows above %.2g", label, p.Name, rel, lim.RMSOverStd, over, rows, lim.MaxAbsLogit)
	}
	_, _, gen := Greedy(t, net, p.Tokens, len(p.Generated), "f16", nil)
	for i := range gen {
		if i < len(p.Margins.Greedy) && p.Margins.Greedy[i] < GptOssGreedyGap {
			break
		}
		if gen[i] != p.Generated[i] {
			t.Errorf("%s %s: greedy tokens %v, want %v (step %d, reference gap %.3g)", label, p.Name, gen, p.Generated, i, p.Margins.Greedy[i])
			break
		}
	}
}
