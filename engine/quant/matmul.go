package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"strata/engine/parallel"
)

// vdLevel is an instruction-set level of the kernels.
type vdLevel int

const (
	levelGeneric    vdLevel = iota // plain Go reference
	levelAVX2                      // AVX2 + FMA + F16C
	levelAVX512VNNI                // the AVX2 kernels built for AVX-512VL, with VNNI int8 dots
)

func (l vdLevel) String() string {
	switch l {
	case levelAVX2:
		return "avx2"
	case levelAVX512VNNI:
		return "avx512vnni"
	}
	return "generic"
}

// CPUFeatures reports the kernel level the dispatcher picked on this CPU ("avx512vnni",
// "avx2", "generic"), for logs and `strata bench`.
func CPUFeatures() string { return vdBestLevel().String() }

// matMulSupported reports whether MatMul can take weights of type t.
func matMulSupported(t Type) bool {
	switch {
	case vdHasIntKernel(t), t == F32, t == F16, t == BF16:
		return true
	}
	return CanDequantize(t)
}

// MatMul computes y[i*ldy + r] = dot(weight row r, activation row i) for r in [r0, r1) and
// every activation row i. w holds the weight's rows of cols values of type t, contiguous
// (RowBytes(t, cols) each). It is serial; callers split row ranges over a pool (or use
// MatMulParallel). Each weight row is read once per call and dotted with all activation
// rows, which stay in cache.
func MatMul(t Type, w []byte, cols int, a *Activations, y []float32, ldy, r0, r1 int) error {
	rb, err := vdCheck(t, w, cols, a, y, ldy, r0, r1)
	if err != nil {
		return err
	}
	return vdMatMul(vdBestLevel(), t, w, rb, a, y, ldy, r0, r1)
}

// MatMulParallel is MatMul over all rows, split over the pool in chunks of at least ~16 KiB
// of weights. A nil pool runs serially.
func MatMulParallel(p *parallel.Pool, t Type, w []byte, rows, cols int, a *Activations, y []float32, ldy int) error {
	rb, err := vdCheck(t, w, cols, a, y, ldy, 0, rows)
	if err != nil {
		return err
	}
	level := vdBestLevel()
	if p == nil || rows == 0 {
		return vdMatMul(level, t, w, rb, a, y, ldy, 0, rows)
	}
	grain := max(1, (16<<10)/rb)
	// Only the dequantise fallback can fail (and not after vdCheck); keep the first error.
	var mu sync.Mutex
	var first error
	p.For(rows, grain, func(lo, hi int) {
		if err := vdMatMul(level, t, w, rb, a, y, ldy, lo, hi); err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	return first
}

// vdCheck validates MatMul's arguments and returns the weight row size in bytes.
func vdCheck(t Type, w []byte, cols int, a *Activations, y []float32, ldy, r0, r1 int) (int, error) {
	if a == nil {
		return 0, fmt.Errorf("quant: matmul %s: nil activations", t)
	}
	if a.weight != t {
		return 0, fmt.Errorf("quant: matmul: weight type %s but activations were made for %s", t, a.weight)
	}
	if a.cols != cols {
		return 0, fmt.Errorf("quant: matmul %s: weight rows have %d columns but activations %d", t, cols, a.cols)
	}
	rb, err := RowBytes(t, cols)
	if err != nil {
		return 0, fmt.Errorf("quant: matmul: %w", err)
	}
	return rb, vdCheckRange(t, len(w), rb, a.n, len(y), ldy, r0, r1)
}

// vdCheckRange checks that rows [r0, r1) lie inside w and every output inside y.
func vdCheckRange(t Type, wLen, rb, n, yLen, ldy, r0, r1 int) error {
	if r0 < 0 || r1 < r0 {
		return fmt.Errorf("quant: matmul %s: bad row range [%d, %d)", t, r0, r1)
	}
	if r1 == r0 {
		return nil
	}
	if r1 > wLen/rb {
		return fmt.Errorf("quant: matmul %s: row range [%d, %d) past the %d whole rows of %d bytes in the weights", t, r0, r1, wLen/rb, rb)
	}
	if n > 1 && ldy < r1 {
		return fmt.Errorf("quant: matmul %s: ldy %d < row end %d would overlap output rows", t, ldy, r1)
	}
	if last := (n-1)*ldy + r1; last > yLen {
		return fmt.Errorf("quant: matmul %s: output needs %d values (n=%d, ldy=%d, rows to %d), y has %d", t, last, n, ldy, r1, yLen)
	}
	return nil
}

// vdMatMul runs MatMul's loops at a given level on checked arguments.
func vdMatMul(level vdLevel, t Type, w []byte, rb int, a *Activations, y []float32, ldy, r0, r1 int) error {
	if r1 == r0 {
		return nil
	}
	if level != levelGeneric && vdNative(level, t, w, rb, a, y, ldy, r0, r1) {
		return nil
	}
	switch {
	case vdHasIntKernel(t):
		for r := r0; r < r1; r++ {
			row := w[r*rb : (r+1)*rb]
			for i := 0; i < a.n; i++ {
				y[i*ldy+r] = vdRefDot(t, row, a, i)
			}
		}
		return nil
	}
	// Float activations: decode each weight row once, then dot it with every activation row.
	buf := make([]float32, a.cols)
	for r := r0; r < r1; r++ {
		if err := vdRowToFloat(t, w[r*rb:(r+1)*rb], buf); err != nil {
			return fmt.Errorf("quant: matmul: row %d: %w", r, err)
		}
		if vdNativeFloatRow(level, buf, a, y[r:], ldy) {
			continue
		}
		for i := 0; i < a.n; i++ {
			y[i*ldy+r] = vdDotF32(buf, a.xf[i*a.cols:(i+1)*a.cols])
		}
	}
	return nil
}

// vdRowToFloat decodes one weight row of type t into dst.
func vdRowToFloat(t Type, src []byte, dst []float32) error {
	switch t {
	case F32:
		for j := range dst {
			dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
		}
	case F16:
		for j := range dst {
			dst[j] = FP16ToFP32(binary.LittleEndian.Uint16(src[2*j:]))
		}
	case BF16:
		for j := range dst {
			dst[j] = BF16ToFP32(binary.LittleEndian.Uint16(src[2*j:]))
		}
	default:
		if err := Dequantize(t, src, dst); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// vdDotF32 is a float32 dot product in a fixed order.
func vdDotF32(x, y []float32) float32 {
	var s float32
	for j, v := range x {
		s += v * y[j]
	}
	return s
}

// MatMulFloat is the float reference: each weight row is dequantised to float32 and dotted
// with float32 activations in a fixed order (deterministic). Same indexing as MatMul; xs
// holds n rows of cols floats.
func MatMulFloat(t Type, w []byte, cols int, xs []float32, n int, y []float32, ldy, r0, r1 int) error {
	if cols <= 0 {
		return fmt.Errorf("quant: matmul float %s: cols %d", t, cols)
	}
	rb, err := RowBytes(t, cols)
	if err != nil {
		return fmt.Errorf("quant: matmul float: %w", err)
	}
	if n <= 0 || len(xs) < n*cols {
		return fmt.Errorf("quant: matmul float %s: %d activation values for n=%d rows of %d", t, len(xs), n, cols)
	}
	if err := vdCheckRange(t, len(w), rb, n, len(y), ldy, r0, r1); err != nil {
		return err
	}
	buf := make([]float32, cols)
	for r := r0; r < r1; r++ {
		if err := vdRowToFloat(t, w[r*rb:(r+1)*rb], buf); err != nil {
			return fmt.Errorf("quant: matmul float: row %d: %w", r, err)
		}
		for i := 0; i < n; i++ {
			y[i*ldy+r] = vdDotF32(buf, xs[i*cols:(i+1)*cols])
		}
	}
	return nil
}
