package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMulTilesMatchReference covers the Q4_K, Q5_K and Q6_K tile kernels' edges: every row count up to
// two tiles plus a remainder, every activation count up to two tiles plus a remainder, at
// every level, against the Go reference. Each result must also be bit-identical whether the
// row range is done in one call or one row at a time (the pool splits rows anywhere), and
// whether an activation row comes alone (decode) or among others (prefill).
func TestMatMulTilesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, wt := range []Type{Q4_K, Q5_K, Q6_K} {
		for _, cols := range []int{256, 3 * 256} {
			for rows := 1; rows <= 7; rows++ {
				for n := 1; n <= 9; n++ {
					w, a, xs, rb, want := vdTileCase(t, wt, rows, cols, n, rng)
					rms := vdRMS(want)
					for _, l := range vdLevels()[1:] {
						whole := checkTileLevel(t, l, wt, w, rb, a, want, rms, rows, n, cols)
						checkTileAlone(t, l, wt, w, rb, xs, whole, rows, n, cols)
					}
				}
			}
		}
	}
}

// TestMatMulTiles32MatchReference covers the signed 32-value types' tiles (two weight rows x
// up to four activation rows, from n = 2): every row count up to three pairs plus one, every
// activation count up to two tiles plus a remainder, odd block counts, at every level,
// against the Go reference; and each result bit-identical whether the rows come in one
// call or one at a time (the lone row's tile, as a pool split at an odd row gives).
func TestMatMulTiles32MatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, wt := range []Type{Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4} {
		for _, cols := range []int{32, 3 * 32, 8 * 32} {
			for rows := 1; rows <= 7; rows++ {
				for n := 2; n <= 9; n++ {
					w, a, _, rb, want := vdTileCase(t, wt, rows, cols, n, rng)
					rms := vdRMS(want)
					for _, l := range vdLevels()[1:] {
						checkTileLevel(t, l, wt, w, rb, a, want, rms, rows, n, cols)
					}
				}
			}
		}
	}
}

// TestMatMulTiles256MatchReference covers the tiles of the IQ types, Q2_K and Q3_K (two
// weight rows x up to four activation rows, from n = 2, over blocks decoded once a call):
// every row count up to three pairs plus one, every activation count up to two tiles plus
// a remainder, odd block counts, at every level, against the Go reference; each result
// bit-identical whether the rows come in one call or one at a time, and whether an
// activation row comes alone (the row kernel) or among others. The last case is wider than
// the decode buffer (VD_I256_CH = 16 blocks) with more activation rows than share one of
// its accumulator buffers (VD_I256_G = 64), so the chunked path runs too.
func TestMatMulTiles256MatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	type shape struct{ cols, rowsMax, nMin, nMax int }
	shapes := []shape{{256, 7, 1, 9}, {3 * 256, 7, 1, 9}, {17 * 256, 3, 66, 66}}
	for _, wt := range []Type{IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_S, IQ4_XS, Q2_K, Q3_K} {
		for _, sh := range shapes {
			for rows := 1; rows <= sh.rowsMax; rows++ {
				for n := sh.nMin; n <= sh.nMax; n++ {
					w, a, xs, rb, want := vdTileCase(t, wt, rows, sh.cols, n, rng)
					rms := vdRMS(want)
					for _, l := range vdLevels()[1:] {
						whole := checkTileLevel(t, l, wt, w, rb, a, want, rms, rows, n, sh.cols)
						checkTileAlone(t, l, wt, w, rb, xs, whole, rows, n, sh.cols)
					}
				}
			}
		}
	}
}

// checkTileAlone runs each activation row of xs alone (as decode does) against all rows
// at level l and holds the results to the bits of whole, the n rows' product in one call.
func checkTileAlone(t *testing.T, l vdLevel, wt Type, w []byte, rb int, xs, whole []float32, rows, n, cols int) {
	t.Helper()
	for i := range n {
		a1, err := NewActivations(wt, cols, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := a1.Set(0, xs[i*cols:(i+1)*cols]); err != nil {
			t.Fatal(err)
		}
		y1 := make([]float32, rows)
		if err := vdMatMul(l, wt, w, rb, a1, y1, rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		for r, g := range y1 {
			if g != whole[i*rows+r] {
				t.Fatalf("%s %s cols=%d rows=%d n=%d: y[%d,%d] = %g alone, %g among %d rows", wt, l, cols, rows, n, i, r, g, whole[i*rows+r], n)
			}
		}
	}
}

// checkTileLevel runs all rows x n activation rows at level l in one call and one row at a
// time (as a pool split anywhere gives), holds the call to want (the generic level; rms its
// scale) and the two to the same bits, and returns the one-call result.
func checkTileLevel(t *testing.T, l vdLevel, wt Type, w []byte, rb int, a *Activations, want []float32, rms float64, rows, n, cols int) []float32 {
	t.Helper()
	whole := make([]float32, n*rows)
	if err := vdMatMul(l, wt, w, rb, a, whole, rows, 0, rows); err != nil {
		t.Fatal(err)
	}
	single := make([]float32, n*rows)
	for r := range rows {
		if err := vdMatMul(l, wt, w, rb, a, single, rows, r, r+1); err != nil {
			t.Fatal(err)
		}
	}
	for k, g := range whole {
		if d := math.Abs(float64(g - want[k])); d > 1e-5*(math.Abs(float64(want[k]))+rms) || math.IsNaN(float64(g)) {
			t.Fatalf("%s %s cols=%d rows=%d n=%d: y[%d,%d] = %g, reference %g", wt, l, cols, rows, n, k/rows, k%rows, g, want[k])
		}
		if single[k] != g {
			t.Fatalf("%s %s cols=%d rows=%d n=%d: y[%d,%d] = %g by rows, %g in one call", wt, l, cols, rows, n, k/rows, k%rows, single[k], g)
		}
	}
	return whole
}

// vdTileCase is random weight rows of type wt, n random activation rows (and the floats
// they came from), the row size, and the generic level's products, the reference.
func vdTileCase(t *testing.T, wt Type, rows, cols, n int, rng *rand.Rand) (w []byte, a *Activations, xs []float32, rb int, want []float32) {
	t.Helper()
	w = vdRandomRows(wt, rows, cols, rng)
	a, xs = vdRandomActs(t, wt, cols, n, rng)
	rb, _ = RowBytes(wt, cols)
	want = make([]float32, n*rows)
	if err := vdMatMul(levelGeneric, wt, w, rb, a, want, rows, 0, rows); err != nil {
		t.Fatal(err)
	}
	return w, a, xs, rb, want
}
