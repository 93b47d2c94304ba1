package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLU checks the kernel against the float64-exp reference on random values, the
// range limits and odd lengths (the tail goes through the vector lanes too).
func TestSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 7, 8, 9, 768, 1001} {
		g := make([]float32, n)
		u := make([]float32, n)
		for i := range g {
			g[i] = float32(rng.NormFloat64() * 4)
			u[i] = float32(rng.NormFloat64())
		}
		edges := []float32{0, float32(math.Copysign(0, -1)), 1e-8, -1e-8, 20, -20, 87, -87, 88.7, -88.7, 100, -100, 1e30, -1e30}
		for i, v := range edges {
			if i < n {
				g[i] = v
			}
		}
		want := append([]float32(nil), g...)
		swiGLUGo(want, u)
		got := append([]float32(nil), g...)
		swiGLU(got, u)
		for i := range got {
			d := math.Abs(float64(got[i] - want[i]))
			if math.IsNaN(float64(got[i])) || d > 1e-6*math.Abs(float64(want[i]))+1e-30 {
				t.Fatalf("n=%d: swiGLU(%g, %g) = %g, want %g", n, g[i], u[i], got[i], want[i])
			}
		}
	}
}
