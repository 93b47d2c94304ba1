package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSegmentRowsSplitsExactly: however the cost units are cut into ranges, the ranges
// together hand out every row of every segment exactly once.
func TestSegmentRowsSplitsExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for trial := range 200 {
		segs := make([]segment, 1+rng.IntN(12))
		starts := make([]int, len(segs)+1)
		for i := range segs {
			segs[i] = segment{w: &Weight{rows: 1 + rng.IntN(50)}, n: 1 + rng.IntN(70)}
			starts[i+1] = starts[i] + segs[i].w.rows*rowCost(segs[i].n)
		}
		total := starts[len(segs)]
		cuts := []int{0, total}
		for range rng.IntN(40) {
			cuts = append(cuts, rng.IntN(total+1))
		}
		slices.Sort(cuts)
		seen := make([][]int, len(segs))
		for i := range segs {
			seen[i] = make([]int, segs[i].w.rows)
		}
		for c := 0; c+1 < len(cuts); c++ {
			segmentRows(segs, starts, cuts[c], cuts[c+1], func(i int, s *segment, r0, r1 int) {
				if r0 < 0 || r1 > s.w.rows || r0 >= r1 {
					t.Fatalf("trial %d: rows [%d, %d) of a %d-row segment", trial, r0, r1, s.w.rows)
				}
				if s != &segs[i] {
					t.Fatalf("trial %d: segment %d handed out as another's index", trial, i)
				}
				for r := r0; r < r1; r++ {
					seen[i][r]++
				}
			})
		}
		for i := range segs {
			for r, k := range seen[i] {
				if k != 1 {
					t.Fatalf("trial %d: segment %d row %d handed out %d times (cuts %v)", trial, i, r, k, cuts)
				}
			}
		}
	}
}
