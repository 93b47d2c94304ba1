package gpu

import "testing"

// TestMostFree: the main GPU by default is the card with the most free memory, the first of
// equals; none without cards.
func TestMostFree(t *testing.T) {
	for _, tc := range []struct {
		free []int64
		want int
	}{
		{nil, -1},
		{[]int64{5}, 0},
		{[]int64{6 << 30, 22 << 30, 10 << 30}, 1},
		{[]int64{8, 8, 3}, 0},
		{[]int64{0, 0, 1}, 2},
	} {
		if got := MostFree(tc.free); got != tc.want {
			t.Errorf("MostFree(%v) = %d, want %d", tc.free, got, tc.want)
		}
	}
}
