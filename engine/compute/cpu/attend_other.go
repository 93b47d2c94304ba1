//go:build !amd64 || !cgo

package cpu

func attendF16Fast(int) bool { return false }

func attendF16(q []float32, qs int, k, v []uint16, stride, n, t, g, d int, scale float32, scores, out, ml []float32) {
	panic("cpu: attendF16 without a vector kernel") // unreachable: attendF16Fast is false
}

func attendQ8(q []float32, qs int, k, v []int8, ks, vs []float32, stride, n, t, g, d int, scale float32, scores, out, ml []float32) {
	panic("cpu: attendQ8 without a vector kernel") // unreachable: attendF16Fast is false
}
