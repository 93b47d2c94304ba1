package quant

import (
	"fmt"
	"math"
)

// actKind is how an activation is kept for one weight type.
type actKind int

const (
	actFloat  actKind = iota // float32 as is (float weights, and the dequantise fallback)
	actQ8x32                 // 32-value blocks: float32 scale, int8 values, int16 block sum
	actQ8x256                // 256-value blocks: float32 scale, int8 values, sixteen 16-value sums
)

// actKindFor picks the activation format that weight type t is dotted with.
func actKindFor(t Type) actKind {
	switch t {
	case Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4:
		return actQ8x32
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return actQ8x256
	}
	return actFloat
}

// Activations holds n rows of a float activation, quantised once for dotting with weights of
// one weight type: Q8_0-style 32-blocks (with the block sums that Q4_1/Q5_1 and the offset
// types need) for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL/MXFP4, Q8_K-style 256-blocks with 16-value
// sums for the k-quants, IQ4_XS and the IQ2/IQ3 grid types, and float32 kept as is for every
// other type (F32/F16/BF16 are dotted in float; the rest are dequantised one weight row at a
// time).
//
// The scale is a float32 (not fp16 as in ggml): it costs nothing here and loses less.
type Activations struct {
	weight Type
	kind   actKind
	cols   int
	n      int
	block  int // values per activation block (1 for float)

	qs   []int8    // n*cols quantised values
	d    []float32 // n*cols/block scales
	sums []int16   // per block (actQ8x32) or per 16 values (actQ8x256): sum of qs
	xf   []float32 // n*cols floats (actFloat)
}

// NewActivations allocates room for n rows of cols values to be dotted with weights of type
// weight. It fails for a type the kernels cannot handle or cols that is not a whole number of
// the weight's blocks.
func NewActivations(weight Type, cols, n int) (*Activations, error) {
	a := &Activations{}
	if err := a.Reset(weight, cols, n); err != nil {
		return nil, err
	}
	return a, nil
}

// Reset makes a hold n rows of cols values for weights of type weight, as NewActivations
// does, keeping its buffers where they are large enough: a decode step makes a dozen
// activations per layer, and allocating them anew cost about 1% of its time. Rows hold
// stale values until Set or CopyRow writes them.
func (a *Activations) Reset(weight Type, cols, n int) error {
	if !weight.Known() {
		return fmt.Errorf("quant: activations: unknown weight type id %d", uint32(weight))
	}
	if cols <= 0 || n <= 0 {
		return fmt.Errorf("quant: activations for %s: need cols > 0 and n > 0, got cols=%d n=%d", weight, cols, n)
	}
	if _, err := RowBytes(weight, cols); err != nil {
		return fmt.Errorf("quant: activations: %w", err)
	}
	if !matMulSupported(weight) {
		return fmt.Errorf("quant: activations: no matmul kernel or dequantiser for weight type %s", weight)
	}
	a.weight, a.kind, a.cols, a.n, a.block = weight, actKindFor(weight), cols, n, 1
	switch a.kind {
	case actQ8x32:
		a.block = 32
		a.qs = resize(a.qs, n*cols)
		a.d = resize(a.d, n*cols/32)
		a.sums = resize(a.sums, n*cols/32)
	case actQ8x256:
		a.block = QK_K
		a.qs = resize(a.qs, n*cols)
		a.d = resize(a.d, n*cols/QK_K)
		a.sums = resize(a.sums, n*cols/16)
	default:
		a.xf = resize(a.xf, n*cols)
	}
	return nil
}

// resize returns s with length n, reallocated only when its capacity is short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// CopyRow sets row i to row j of src, which must be made for the same weight type and
// columns: gathering rows quantised once is cheaper than quantising each copy (a MoE layer
// gives every routed expert its own batch of the same token rows).
func (a *Activations) CopyRow(i int, src *Activations, j int) error {
	if src.weight != a.weight || src.cols != a.cols {
		return fmt.Errorf("quant: activations: copy a row for %s x %d into activations for %s x %d",
			src.weight, src.cols, a.weight, a.cols)
	}
	if i < 0 || i >= a.n || j < 0 || j >= src.n {
		return fmt.Errorf("quant: activations: copy row %d of %d into row %d of %d", j, src.n, i, a.n)
	}
	c := a.cols
	if a.kind == actFloat {
		copy(a.xf[i*c:(i+1)*c], src.xf[j*c:(j+1)*c])
		return nil
	}
	nb, ns := c/a.block, len(a.sums)/a.n
	copy(a.qs[i*c:(i+1)*c], src.qs[j*c:(j+1)*c])
	copy(a.d[i*nb:(i+1)*nb], src.d[j*nb:(j+1)*nb])
	copy(a.sums[i*ns:(i+1)*ns], src.sums[j*ns:(j+1)*ns])
	return nil
}

// N is the number of activation rows.
func (a *Activations) N() int { return a.n }

// Cols is the length of each activation row.
func (a *Activations) Cols() int { return a.cols }

// Weight is the weight type these activations were made for.
func (a *Activations) Weight() Type { return a.weight }

// Set quantises x into row i. x must hold Cols() finite values.
func (a *Activations) Set(i int, x []float32) error {
	if i < 0 || i >= a.n {
		return fmt.Errorf("quant: activations: row %d out of range [0, %d)", i, a.n)
	}
	if len(x) != a.cols {
		return fmt.Errorf("quant: activations: row %d has %d values, want %d", i, len(x), a.cols)
	}
	if a.kind == actFloat {
		copy(a.xf[i*a.cols:], x)
		return nil
	}
	nb := a.cols / a.block
	qs := a.qs[i*a.cols : (i+1)*a.cols]
	d := a.d[i*nb : (i+1)*nb]
	sumsPerBlock := 1
	if a.kind == actQ8x256 {
		sumsPerBlock = QK_K / 16
	}
	sums := a.sums[i*nb*sumsPerBlock : (i+1)*nb*sumsPerBlock]
	if vdQuantizeNative(vdBestLevel(), x, a.block, qs, d, sums) {
		return nil
	}
	vdQuantizeRow(x, a.block, qs, d, sums)
	return nil
}

// vdQuantizeRow is the Go path of Set: whole blocks of x, sums per len(x)/len(sums) values.
func vdQuantizeRow(x []float32, block int, qs []int8, d []float32, sums []int16) {
	nb := len(x) / block
	per := len(sums) / nb
	for b := 0; b < nb; b++ {
		vdQuantizeBlock(x[b*block:(b+1)*block], qs[b*block:(b+1)*block], &d[b], sums[b*per:(b+1)*per])
	}
}

// vdTinyBlock: a block whose largest magnitude is below this counts as zero (127/amax
// would overflow float32 for subnormal amax).
const vdTinyBlock = 1e-30

// vdQuantizeBlock rounds one block to int8 with a symmetric scale amax/127 (so no value is
// -128, which the sign trick of the x86 kernels relies on) and fills the group sums, each
// covering len(x)/len(sums) values.
func vdQuantizeBlock(x []float32, q []int8, d *float32, sums []int16) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v)))) // max keeps a NaN
	}
	if amax < vdTinyBlock || amax != amax || amax > math.MaxFloat32 {
		// All (nearly) zero; or NaN/Inf, which no 8-bit code holds: a NaN scale makes every
		// dot with this block NaN, as the float path would, instead of a quiet wrong number.
		*d = 0
		if amax != amax || amax > math.MaxFloat32 {
			*d = float32(math.NaN())
		}
		clear(q)
		clear(sums)
		return
	}
	// The same float32 steps as the x86 path (vd_quantize), rounding half to even.
	*d = amax / 127
	id := 127 / amax
	g := len(x) / len(sums)
	for s := range sums {
		var sum int
		for j := s * g; j < (s+1)*g; j++ {
			v := int(math.RoundToEven(float64(x[j] * id)))
			v = min(max(v, -127), 127)
			q[j] = int8(v)
			sum += v
		}
		sums[s] = int16(sum)
	}
}

// dequantRow returns activation row i as floats (scale times value), for tests and the
// reference path of float-kind activations.
func (a *Activations) dequantRow(i int) []float32 {
	out := make([]float32, a.cols)
	if a.kind == actFloat {
		copy(out, a.xf[i*a.cols:(i+1)*a.cols])
		return out
	}
	nb := a.cols / a.block
	for j := range out {
		out[j] = a.d[i*nb+j/a.block] * float32(a.qs[i*a.cols+j])
	}
	return out
}
