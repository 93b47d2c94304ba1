package gpu

import (
	"slices"
	"testing"

	"strata/cuda"
)

// TestGroupByExpert checks the slot grouping the grouped GEMM reads: groups ascending by
// expert, offsets partitioning the sorted rows, order and rowOfSlot inverse permutations,
// and the slots of one expert kept in slot order.
func TestGroupByExpert(t *testing.T) {
	cases := []struct {
		name    string
		ids     []int32
		experts int
		want    []int32 // experts with rows
		offsets []int32
		maxRows int
	}{
		{"one token", []int32{5, 2}, 8, []int32{2, 5}, []int32{0, 1, 2}, 1},
		{"shared experts", []int32{3, 1, 1, 7, 3, 1}, 8, []int32{1, 3, 7}, []int32{0, 3, 5, 6}, 3},
		{"edges", []int32{0, 127, 0, 127}, 128, []int32{0, 127}, []int32{0, 2, 4}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := groupByExpert(c.ids, c.experts)
			if !slices.Equal(g.experts, c.want) || !slices.Equal(g.offsets, c.offsets) || g.maxRows != c.maxRows {
				t.Fatalf("experts %v offsets %v maxRows %d, want %v %v %d", g.experts, g.offsets, g.maxRows, c.want, c.offsets, c.maxRows)
			}
			for gi, e := range g.experts {
				prev := int32(-1)
				for row := g.offsets[gi]; row < g.offsets[gi+1]; row++ {
					s := g.order[row]
					if c.ids[s] != e {
						t.Errorf("sorted row %d is slot %d of expert %d, in the group of expert %d", row, s, c.ids[s], e)
					}
					if s <= prev {
						t.Errorf("group of expert %d is not in slot order: %v", e, g.order[g.offsets[gi]:g.offsets[gi+1]])
					}
					prev = s
					if g.rowOfSlot[s] != row {
						t.Errorf("rowOfSlot[%d] = %d, want %d", s, g.rowOfSlot[s], row)
					}
				}
			}
		})
	}
}

func TestCheckIDs(t *testing.T) {
	if err := checkIDs([]int32{0, 7, 3}, 8); err != nil {
		t.Errorf("valid ids refused: %v", err)
	}
	for _, bad := range [][]int32{{0, 8}, {-1, 2}} {
		if err := checkIDs(bad, 8); err == nil {
			t.Errorf("ids %v of 8 experts accepted", bad)
		}
	}
}

// TestQ8CacheOverlap checks that a write over any byte of the cached source rows drops
// the cached quantisation, and that writes elsewhere keep it.
func TestQ8CacheOverlap(t *testing.T) {
	const base = cuda.DevicePtr(1 << 20)
	cases := []struct {
		name string
		p    cuda.DevicePtr
		n    int
		keep bool
	}{
		{"before", base - 64, 64, true},
		{"after", base + 4*2*32, 16, true},
		{"same", base, 4 * 2 * 32, false},
		{"tail", base + 4*2*32 - 4, 8, false},
		{"head", base - 4, 8, false},
		{"inside", base + 100, 4, false},
	}
	for _, c := range cases {
		q := q8Cache{x: base, rows: 2, cols: 32, xq: 1}
		q.dropIfOverlaps(c.p, c.n)
		if kept := q.x != 0; kept != c.keep {
			t.Errorf("%s: write [%#x, +%d) kept=%v, want %v", c.name, uint64(c.p), c.n, kept, c.keep)
		}
	}
}

func TestRouterTopKFits(t *testing.T) {
	for _, c := range []struct {
		experts, k int
		ok         bool
	}{{128, 8, true}, {512, 10, true}, {8, 2, true}, {8, 9, false}, {64, 33, false}, {2048, 32, true}, {2049, 8, false}} {
		if got := routerTopKFits(c.experts, c.k); got != c.ok {
			t.Errorf("routerTopKFits(%d, %d) = %v, want %v", c.experts, c.k, got, c.ok)
		}
	}
}
