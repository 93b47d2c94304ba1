//go:build !amd64 || !cgo

package cpu

func rmsNorm(dst, x, w []float32, rows int, eps float32) { rmsNormGo(dst, x, w, rows, eps) }

func addScaled(o []float32, s float32, x []float32) { addScaledGo(o, s, x) }
