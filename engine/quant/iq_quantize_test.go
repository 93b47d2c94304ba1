package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

func iqQuantTypes() []Type { return []Type{IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S} }

// TestQuantizeIQDotAgreesWithFloat quantises random rows with the IQ quantisers and dots
// them with MatMul's integer kernels: the result must equal the float dot of the
// dequantised rows with the 8-bit activations as decoded (only float rounding apart), and
// sit within what 8-bit activations explain of the dot with the activations unquantised.
func TestQuantizeIQDotAgreesWithFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols, n = 7, 3 * QK_K, 3
	for _, wt := range iqQuantTypes() {
		x := gaussian(rows*cols, uint64(wt))
		rb, _ := RowBytes(wt, cols)
		w := make([]byte, rows*rb)
		if err := Quantize(wt, x, w); err != nil {
			t.Fatal(err)
		}
		a, xs := vdRandomActs(t, wt, cols, n, rng)
		got := make([]float32, n*rows)
		if err := MatMul(wt, w, cols, a, got, rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		wf := make([]float32, cols)
		for r := range rows {
			if err := Dequantize(wt, w[r*rb:(r+1)*rb], wf); err != nil {
				t.Fatal(err)
			}
			wn := vdRMS(wf) * math.Sqrt(cols)
			for i := range n {
				xq := a.dequantRow(i)
				var exact, plain float64
				for j, v := range wf {
					exact += float64(v) * float64(xq[j])
					plain += float64(v) * float64(xs[i*cols+j])
				}
				xn := vdRMS(xs[i*cols:(i+1)*cols]) * math.Sqrt(cols)
				g := float64(got[i*rows+r])
				if d := math.Abs(g - exact); d > 1e-5*wn*xn || math.IsNaN(d) {
					t.Errorf("%s: y[%d,%d] = %g, float dot of the decoded operands %g", wt, i, r, g, exact)
				}
				if d := math.Abs(g - plain); d > 1e-2*wn*xn {
					t.Errorf("%s: y[%d,%d] = %g, float dot with unquantised activations %g", wt, i, r, g, plain)
				}
			}
		}
	}
}

// TestQuantizeIQScalesAndSigns: a block whose groups differ a lot in size keeps each
// group's precision (the 4-bit group scales are used), and the signs come back: every value
// whose magnitude is above the group's smallest keeps its sign (only a parity fix may flip
// the smallest of 8).
func TestQuantizeIQScalesAndSigns(t *testing.T) {
	x := gaussian(QK_K, 9)
	for i := range x {
		x[i] *= float32(1 + (i/32)%4) // groups of 32 at 1x..4x
	}
	for _, wt := range iqQuantTypes() {
		y := roundTrip(t, wt, x)
		for k := 0; k < QK_K; k += 8 {
			minJ := k
			for j := k; j < k+8; j++ {
				if absF32(x[j]) < absF32(x[minJ]) {
					minJ = j
				}
			}
			for j := k; j < k+8; j++ {
				if j != minJ && x[j] != 0 && (x[j] < 0) != (y[j] < 0) {
					t.Errorf("%s: value %d: %g came back as %g", wt, j, x[j], y[j])
				}
			}
		}
		// Every group of 32 carries the error of the whole block, not 4x on small groups.
		var eMax, eMin float64 = 0, math.Inf(1)
		for g := 0; g < QK_K; g += 32 {
			e := relRMS(x[g:g+32], y[g:g+32])
			eMax, eMin = max(eMax, e), min(eMin, e)
		}
		if eMax > 3*eMin {
			t.Errorf("%s: relative error per group spans %.3f..%.3f", wt, eMin, eMax)
		}
	}
}

// BenchmarkQuantizeIQ: values per second of each IQ quantiser on one core.
func BenchmarkQuantizeIQ(b *testing.B) {
	x := gaussian(16*QK_K, 1)
	for _, wt := range iqQuantTypes() {
		b.Run(wt.String(), func(b *testing.B) {
			rb, _ := RowBytes(wt, len(x))
			dst := make([]byte, rb)
			Quantize(wt, x, dst) // builds the grids outside the timing
			b.SetBytes(int64(4 * len(x)))
			b.ResetTimer()
			for b.Loop() {
				Quantize(wt, x, dst)
			}
		})
	}
}

// BenchmarkIQMatVecLevels: one 4096x4096 IQ matrix times one activation row on one thread,
// at every kernel level this CPU has (generic: the Go reference), on quantised Gaussian
// weights.
func BenchmarkIQMatVecLevels(b *testing.B) {
	const dim = 4096
	x := gaussian(dim*dim, 3)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, wt := range iqQuantTypes() {
		rb, _ := RowBytes(wt, dim)
		w := make([]byte, dim*rb)
		if err := Quantize(wt, x, w); err != nil {
			b.Fatal(err)
		}
		a, _ := vdRandomActs(b, wt, dim, 1, rng)
		y := make([]float32, dim)
		for _, l := range vdLevels() {
			b.Run(wt.String()+"/"+l.String(), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					if err := vdMatMul(l, wt, w, rb, a, y, dim, 0, dim); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
