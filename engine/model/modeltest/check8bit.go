package modeltest

import (
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/model"
	"strata/engine/sample"
)

// The 8-bit rules that the gptoss-tiny and qwen35moe-tiny READMEs state in words only (the
// top-1 rule, and a tenth of the rows past max_abs_logit for near-tie expert flips; with 16
// or 32 experts router margins are small, so an 8-bit path is judged by RMS and top-1).
const (
	// ArgmaxGap8Bit: an 8-bit path's argmax must agree where the reference gap exceeds this.
	ArgmaxGap8Bit = 0.5
	// RowsOver8Bit: the share of rows allowed past the 8-bit max_abs_logit (near-tie
	// expert flips).
	RowsOver8Bit = 0.10
	// GreedyGap8Bit: the greedy continuation may part from the reference from the first
	// step whose top1-top2 gap is below this (as on the CPU's 8-bit path).
	GreedyGap8Bit = 0.05
)

// Check8Bit holds net (an 8-bit path: 8-bit activations, f16 KV) to prompt p of a
// gptoss-tiny or qwen35moe-tiny variant in folder dir under the README's 8-bit rule: fed the
// reference continuation, the logits within the RMS/std bound with at most RowsOver8Bit of
// the rows past max_abs_logit and the argmax equal wherever the reference gap exceeds
// ArgmaxGap8Bit; its own greedy continuation equal up to the first near tie.
func Check8Bit(t testing.TB, net *model.Model, dir string, p fixtures.RefPrompt, rule fixtures.Tolerances, label string) {
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
		if r < len(margins) && margins[r] > ArgmaxGap8Bit && sample.Argmax(g) != sample.Argmax(w) {
			t.Errorf("%s %s: row %d: argmax differs where the reference gap is %.2f", label, p.Name, r, margins[r])
		}
	}
	maxAbs, rel := Compare(got, want)
	t.Logf("%s %s: max |Δlogit| %.3g, RMS/std %.4f, %d of %d rows above %.2g", label, p.Name, maxAbs, rel, over, rows, lim.MaxAbsLogit)
	if rel > lim.RMSOverStd || float64(over) > RowsOver8Bit*float64(rows) {
		t.Errorf("%s %s: logits off: RMS/std %.4f (limit %.2g), %d of %d rows above %.2g", label, p.Name, rel, lim.RMSOverStd, over, rows, lim.MaxAbsLogit)
	}
	_, _, gen := Greedy(t, net, p.Tokens, len(p.Generated), "f16", nil)
	for i := range gen {
		if i < len(p.Margins.Greedy) && p.Margins.Greedy[i] < GreedyGap8Bit {
			break
		}
		if gen[i] != p.Generated[i] {
			t.Errorf("%s %s: greedy tokens %v, want %v (step %d, reference gap %.3g)", label, p.Name, gen, p.Generated, i, p.Margins.Greedy[i])
			break
		}
	}
}
