package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRMSNormKernel checks the vector norm against the Go reference bit for bit, in place
// and not, at lengths around the vector width and with an all-zero row (scale 1/sqrt(eps)).
func TestRMSNormKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dim := range []int{1, 3, 4, 7, 8, 9, 64, 128, 2049} {
		for _, rows := range []int{1, 3} {
			x := make([]float32, rows*dim)
			w := make([]float32, dim)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
			}
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			clear(x[:dim]) // row 0: all zero
			want := make([]float32, len(x))
			rmsNormGo(want, x, w, rows, 1e-6)
			if math.IsInf(float64(want[0]), 0) || math.IsNaN(float64(want[0])) {
				t.Fatalf("reference %v on a zero row", want[0])
			}
			got := make([]float32, len(x))
			rmsNorm(got, x, w, rows, 1e-6)
			if !slices.Equal(got, want) {
				t.Fatalf("dim %d rows %d: rmsNorm differs from the reference: %v vs %v", dim, rows, got[:min(8, len(got))], want[:min(8, len(want))])
			}
			inPlace := slices.Clone(x)
			rmsNorm(inPlace, inPlace, w, rows, 1e-6)
			if !slices.Equal(inPlace, want) {
				t.Fatalf("dim %d rows %d: rmsNorm in place differs from the reference", dim, rows)
			}
		}
	}
}

// TestAddScaledKernel checks the vector o += s·x against the Go reference bit for bit.
func TestAddScaledKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 7, 8, 9, 2048, 2051} {
		o := make([]float32, n)
		x := make([]float32, n+3) // longer than o, as the MoE's rows may be
		for i := range o {
			o[i] = float32(rng.NormFloat64())
		}
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 10)
		}
		s := float32(rng.Float64())
		want := slices.Clone(o)
		addScaledGo(want, s, x)
		addScaled(o, s, x)
		if !slices.Equal(o, want) {
			t.Fatalf("n=%d: addScaled differs from the reference", n)
		}
	}
}
