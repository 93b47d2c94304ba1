//go:build !amd64 || !cgo

package cpu

// swiGLU sets g[i] = silu(g[i]) * u[i].
func swiGLU(g, u []float32) { swiGLUGo(g, u) }
