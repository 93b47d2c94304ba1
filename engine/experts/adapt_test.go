package experts

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPickSwaps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		heat    []float32
		in, out []int32
		limit   int
		want    [][2]int32
	}{
		{"hottest in for coldest out", []float32{0, 9, 30, 1, 20}, []int32{2, 4}, []int32{0, 3, 1}, 8, [][2]int32{{2, 0}, {4, 3}}},
		{"hotter, but not by enough", []float32{10, 20}, []int32{1}, []int32{0}, 8, nil},             // 10 < 3 sqrt(30)
		{"hotter by 3 deviations", []float32{10, 30}, []int32{1}, []int32{0}, 8, [][2]int32{{1, 0}}}, // 20 >= 3 sqrt(40)
		{"many routes, under the gain", []float32{1000, 1400}, []int32{1}, []int32{0}, 8, nil},
		{"few routes", []float32{0, 8}, []int32{1}, []int32{0}, 8, nil}, // 8 < 3 sqrt(8)
		{"limit", []float32{0, 0, 50, 40}, []int32{3, 2}, []int32{0, 1}, 1, [][2]int32{{2, 0}}},
		{"stops at the first pair that does not pay", []float32{0, 20, 50, 30}, []int32{3, 2}, []int32{0, 1}, 8, [][2]int32{{2, 0}}},
		{"nothing to take in", []float32{3, 4}, nil, []int32{0, 1}, 8, nil},
	} {
		got := pickSwaps(tc.heat, slices.Clone(tc.in), slices.Clone(tc.out), tc.limit, paysToSwap)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: pickSwaps = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAdaptConverges runs the adaptive policy (pickSwaps, the pass limit and the decay, as
// adapt applies them) on one layer's routes drawn at random, a 512-token prompt and then
// decode: with skewed routes and the coldest experts in VRAM at the start, the pass after
// the prompt brings the slots near the routes' best share, the slots keep it, and the
// swapping stops; with even routes it hardly swaps at all.
func TestAdaptConverges(t *testing.T) {
	const experts, slots, topK, every, prompt, passes = 128, 40, 8, 32, 512, 60
	for _, tc := range []struct {
		name     string
		zipf     float64 // route probability of the expert of rank r is prop. to 1/r^zipf
		minFirst float64 // of the best share, after the prompt's pass
		minShare float64 // of the best share, over the last third of the passes
		maxLate  float64 // swaps a pass, over the last third
	}{
		{"skewed", 1, 0.85, 0.9, 1},
		{"even", 0, 0, 0.95, 0.5},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		order := rng.Perm(experts) // order[r] is the expert of rank r
		p := make([]float64, experts)
		for r, e := range order {
			p[e] = 1 / math.Pow(float64(r+1), tc.zipf)
		}
		cdf := make([]float64, experts)
		var sum float64
		for e := range p {
			sum += p[e]
			cdf[e] = sum
		}
		best := 0.0
		for _, e := range order[:slots] {
			best += p[e] / sum
		}
		inVRAM := make([]bool, experts)
		for _, e := range order[experts-slots:] { // the coldest start in VRAM
			inVRAM[e] = true
		}
		heat := make([]float32, experts)
		var first, share, late float64
		for pass := range passes {
			tokens := every
			if pass == 0 {
				tokens = prompt
			}
			for range tokens * topK {
				e, _ := slices.BinarySearch(cdf, rng.Float64()*sum)
				heat[min(e, experts-1)]++
			}
			var in, out []int32
			for e := range experts {
				if inVRAM[e] {
					out = append(out, int32(e))
				} else {
					in = append(in, int32(e))
				}
			}
			pairs := pickSwaps(heat, in, out, swapLimit(slots, tokens, every), paysToSwap)
			for _, pr := range pairs {
				inVRAM[pr[0]], inVRAM[pr[1]] = true, false
			}
			for e := range heat {
				heat[e] *= adaptDecay
			}
			s := 0.0
			for e := range experts {
				if inVRAM[e] {
					s += p[e] / sum
				}
			}
			if pass == 0 {
				first = s
			}
			if pass >= passes*2/3 {
				late += float64(len(pairs)) / float64(passes-passes*2/3)
				share += s / float64(passes-passes*2/3)
			}
		}
		if first < tc.minFirst*best {
			t.Errorf("%s: VRAM holds %.3f of the routes after the prompt, want at least %.2f of the best %.3f", tc.name, first, tc.minFirst, best)
		}
		if share < tc.minShare*best {
			t.Errorf("%s: VRAM holds %.3f of the routes late, want at least %.2f of the best %.3f", tc.name, share, tc.minShare, best)
		}
		if late > tc.maxLate {
			t.Errorf("%s: %.2f swaps a pass late, want at most %g", tc.name, late, tc.maxLate)
		}
		t.Logf("%s: share %.3f after the prompt, %.3f late (best %.3f), %.2f swaps a pass", tc.name, first, share, best, late)
	}
}
