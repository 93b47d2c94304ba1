package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// refMatVec is y = W x in float64.
func refMatVec(w []float32, x []float32, rows, cols int) []float64 {
	y := make([]float64, rows)
	for r := 0; r < rows; r++ {
		s := 0.0
		for c := 0; c < cols; c++ {
			s += float64(w[r*cols+c]) * float64(x[c])
		}
		y[r] = s
	}
	return y
}

// checkRows compares y with ref row by row, relative to ||W_row|| ||x||.
func checkRows(t *testing.T, what string, got []float32, ref []float64, w []float32, x []float32, rows, cols int, tol float64) {
	t.Helper()
	checkFinite(t, what, got)
	xn := norm(x)
	for r := 0; r < rows; r++ {
		scale := norm(w[r*cols:(r+1)*cols]) * xn
		if d := math.Abs(float64(got[r]) - ref[r]); d > tol*scale+1e-30 {
			t.Fatalf("%s: row %d: got %g want %g (|diff| %.3g > %.1g x %.3g)", what, r, got[r], ref[r], d, tol, scale)
		}
	}
}

func TestMatVec(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range cuda.SupportedTypes() {
		qk := blockOf(typ)
		for _, sh := range []struct{ rows, blocks int }{{1, 1}, {17, 3}, {33, 8}, {130, 11}} {
			rows, cols := sh.rows, sh.blocks*qk
			if qk == 8 {
				cols = sh.blocks * 40 // plain types: odd multiples of 8
			}
			t.Run(fmt.Sprintf("%v/%dx%d", typ, rows, cols), func(t *testing.T) {
				raw, w := makeWeights(t, r, typ, rows, cols)
				x := randFloats(r, cols, 1)
				dw, dx := upload(t, g, raw), upload(t, g, x)
				dy := g.buf(t, 4*rows)
				if err := g.k.MatVec(g.s, typ, dw, dx, dy, rows, cols); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, rows)
				checkRows(t, "y", got, refMatVec(w, x, rows, cols), w, x, rows, cols, 1e-5)
			})
		}
	}
}

func TestMatVecExperts(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range cuda.SupportedTypes() {
		for _, perExpert := range []bool{false, true} {
			for _, blocks := range []int{1, 2} {
				t.Run(fmt.Sprintf("%v/perExpert=%v/%d-blocks", typ, perExpert, blocks), func(t *testing.T) {
					const nExp, rows = 5, 19
					cols := blocks * blockOf(typ)
					if blockOf(typ) == 8 {
						cols = 72
					}
					raw, w := makeWeights(t, r, typ, nExp*rows, cols)
					stride := len(raw) / nExp
					ids := []int32{3, 0, 3, 4}
					x := randFloats(r, len(ids)*cols, 1)
					dw, dx, dids := upload(t, g, raw), upload(t, g, x), upload(t, g, ids)
					dy := g.buf(t, 4*rows*len(ids))
					if err := g.k.MatVecExperts(g.s, typ, dw, stride, dids, len(ids), dx, perExpert, dy, rows, cols); err != nil {
						t.Fatal(err)
					}
					got := download[float32](t, g, dy, rows*len(ids))
					for e, id := range ids {
						xe := x[:cols]
						if perExpert {
							xe = x[e*cols : (e+1)*cols]
						}
						we := w[int(id)*rows*cols : (int(id)+1)*rows*cols]
						checkRows(t, fmt.Sprintf("slot %d (expert %d)", e, id), got[e*rows:(e+1)*rows], refMatVec(we, xe, rows, cols), we, xe, rows, cols, 1e-5)
					}
				})
			}
		}
	}
}

func TestDequantizeAndGetRows(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range cuda.SupportedTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			qk := blockOf(typ)
			rows, cols := 12, 3*qk
			raw, w := makeWeights(t, r, typ, rows, cols)
			dw := upload(t, g, raw)
			dh := g.buf(t, 2*rows*cols)
			if err := g.k.Dequantize(g.s, typ, dw, dh, rows*cols); err != nil {
				t.Fatal(err)
			}
			half := fromF16(download[uint16](t, g, dh, rows*cols))
			for i, want := range w {
				// f16 rounding: half an ulp relative, or the subnormal step absolute.
				if d := math.Abs(float64(half[i] - want)); d > math.Abs(float64(want))/1024+6e-8 || math.IsNaN(float64(half[i])) {
					t.Fatalf("dequantize value %d: got %g want %g", i, half[i], want)
				}
			}
			ids := []int32{5, 0, 11, 5}
			dids := upload(t, g, ids)
			dout := g.buf(t, 4*len(ids)*cols)
			if err := g.k.GetRows(g.s, typ, dw, dids, len(ids), dout, cols); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, g, dout, len(ids)*cols)
			for i, id := range ids {
				row := w[int(id)*cols : (int(id)+1)*cols]
				for b := 0; b < cols; b += qk {
					mx := 0.0
					for _, v := range row[b : b+qk] {
						mx = math.Max(mx, math.Abs(float64(v)))
					}
					for j := b; j < b+qk; j++ {
						if d := math.Abs(float64(got[i*cols+j] - row[j])); d > 1e-6*mx || math.IsNaN(float64(got[i*cols+j])) {
							t.Fatalf("get_rows id %d value %d: got %g want %g", id, j, got[i*cols+j], row[j])
						}
					}
				}
			}
		})
	}
}
