package synth

import (
	"fmt"
	"math"
)

// hotQuarterTokens is how many simulated tokens ZipfForHotQuarter routes per exponent it
// tries: enough for the share to about half a percent, few enough to take milliseconds.
const hotQuarterTokens = 2048

// ZipfForHotQuarter is the Zipf exponent (Spec.Zipf) at which the hottest quarter of a
// layer's experts takes about share of its routes, for experts experts of which used are
// picked per token. A trained model's routers spread their load (their training balances
// it), so a benchmark of the expert tiers wants such a skew rather than --zipf 1's, where
// the hottest quarter takes nearly everything. The share is that of the router the
// generator writes: a logit of -zipf*ln(rank+1) plus a token-dependent part of spread
// routerGain, top used of them; it is simulated, with the same draws for every exponent,
// and the exponent found by bisection. A share at or below a quarter (flat) gives 0.
func ZipfForHotQuarter(share float64, experts, used int) (float64, error) {
	if experts < 4 || used < 1 || used > experts {
		return 0, fmt.Errorf("synth: a hottest quarter of %d experts (%d per token) is not defined", experts, used)
	}
	hot := experts / 4
	flat := float64(hot) / float64(experts)
	if !(share < 1) { // NaN too
		return 0, fmt.Errorf("synth: a hottest-quarter share of %g: want below 1", share)
	}
	if share <= flat {
		return 0, nil
	}
	noise := make([]float32, hotQuarterTokens*experts)
	fillNormal(stream(1, "hot-quarter", experts), noise, routerGain)
	lo, hi := 0.0, 1.0
	for hotQuarterShare(hi, noise, experts, used) < share {
		if hi > 64 {
			return 0, fmt.Errorf("synth: no Zipf exponent up to 64 gives the hottest quarter %g of the routes", share)
		}
		lo, hi = hi, 2*hi
	}
	for range 30 {
		mid := (lo + hi) / 2
		if hotQuarterShare(mid, noise, experts, used) < share {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// hotQuarterShare routes the simulated tokens (noise: one row of experts logits' random part
// each) with experts ranked 0..experts-1 and returns the share of picks that go to ranks
// below experts/4.
func hotQuarterShare(zipf float64, noise []float32, experts, used int) float64 {
	bias := make([]float64, experts)
	for r := range bias {
		bias[r] = -zipf * math.Log(float64(r+1))
	}
	top := make([]int, 0, used) // ranks picked for a token, best logit first
	logit := func(row []float32, r int) float64 { return bias[r] + float64(row[r]) }
	hot, picks := 0, 0
	for off := 0; off+experts <= len(noise); off += experts {
		row := noise[off : off+experts]
		top = top[:0]
		for r := range experts {
			l := logit(row, r)
			if len(top) == used && l <= logit(row, top[used-1]) {
				continue
			}
			i := len(top)
			if i == used {
				i-- // the last one drops out
			} else {
				top = append(top, r)
			}
			for ; i > 0 && logit(row, top[i-1]) < l; i-- {
				top[i] = top[i-1]
			}
			top[i] = r
		}
		for _, r := range top {
			if r < experts/4 {
				hot++
			}
		}
		picks += len(top)
	}
	return float64(hot) / float64(picks)
}
