package cpu

import "math"

// rmsNormGo normalises rows rows of len(w) values of x into dst (which may be x): each
// value times 1/sqrt(mean square + eps), times its weight. The reference of the vector
// kernel, which gives the same bits, and the path on CPUs without it.
func rmsNormGo(dst, x, w []float32, rows int, eps float32) {
	dim := len(w)
	for r := range rows {
		in, out := x[r*dim:(r+1)*dim], dst[r*dim:(r+1)*dim]
		scale := float32(1 / math.Sqrt(sumSquares(in)/float64(dim)+float64(eps)))
		for i, v := range in {
			out[i] = v * scale * w[i]
		}
	}
}

// sumSquares is the sum of v² in float64, in four interleaved partial sums: one running sum
// waits on the add before it every value, which made the norms of a decode step ~1% of it.
func sumSquares(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0]) * float64(v[0])
		s1 += float64(v[1]) * float64(v[1])
		s2 += float64(v[2]) * float64(v[2])
		s3 += float64(v[3]) * float64(v[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i]) * float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// addScaledGo adds s·x to o (len(x) >= len(o)), four values a turn: the bounds checks of
// the plain loop cost more than its arithmetic. The reference of the vector kernel.
func addScaledGo(o []float32, s float32, x []float32) {
	x = x[:len(o)]
	i := 0
	for ; i+4 <= len(o); i += 4 {
		d, v := o[i:i+4:i+4], x[i:i+4:i+4]
		d[0] += s * v[0]
		d[1] += s * v[1]
		d[2] += s * v[2]
		d[3] += s * v[3]
	}
	for ; i < len(o); i++ {
		o[i] += s * x[i]
	}
}
