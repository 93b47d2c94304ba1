package cpu

import "math"

// swiGLUGo is swiGLU in plain Go: the reference the vector kernel is tested against, and
// the path on CPUs without it.
func swiGLUGo(g, u []float32) {
	for i, v := range g {
		g[i] = v / (1 + float32(math.Exp(float64(-v)))) * u[i]
	}
}
