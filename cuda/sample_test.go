package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/sample"
)

// TestArgmax: the device picks sample.Argmax's index: on random rows of odd lengths, with
// ties (the first wins), -0 against +0, NaNs (never chosen, but index 0 when x[0] is one)
// and all -inf, each row read both at an aligned address and at one that is not.
func TestArgmax(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(41, 42))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{
		{1}, {0, float32(math.Copysign(0, -1))}, {float32(math.Copysign(0, -1)), 0},
		{nan, 5, 7}, {1, nan, 3, nan}, {-inf, -inf, -inf}, {-inf, nan}, {2, 9, 9, 1, 9},
	}
	for _, n := range []int{3, 1000, 1023, 1024, 1025, 4097, 151936, 201088} {
		x := randFloats(r, n, 4)
		rows = append(rows, x)
		tie := make([]float32, n) // the maximum at several places, the first late in the row
		for i := range tie {
			tie[i] = float32(r.IntN(50))
		}
		for _, i := range []int{n - 1, n / 2, n / 3 * 2} {
			tie[i] = 60
		}
		rows = append(rows, tie)
	}
	out := g.buf(t, 4)
	for i, x := range rows {
		// at a 16-byte aligned address (the float4 loads) and one float past it (one at a time)
		for _, shift := range []int{0, 1} {
			padded := append(make([]float32, shift), x...)
			if err := g.k.Argmax(g.s, upload(t, g, padded).Add(4*shift), len(x), out); err != nil {
				t.Fatal(err)
			}
			got := download[int32](t, g, out, 1)[0]
			if want := sample.Argmax(x); int(got) != want {
				t.Errorf("row %d (%d values, %d floats past an aligned address): device %d, host %d", i, len(x), shift, got, want)
			}
		}
	}
	if err := g.k.Argmax(g.s, out, 0, out); err == nil {
		t.Error("an empty row was taken")
	}
}
