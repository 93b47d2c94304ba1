package gpu

import (
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
)

// gemmScratchLimit caps the float16 copy of one weight a batched product dequantises into;
// bigger weights (the output matrix) use GemmQ, which decodes tile by tile, instead.
const gemmScratchLimit = 256 << 20

// q8Cache names the activation rows that the "q8 x" scratch holds quantised to 8 bits.
// Every op that writes an activation drops it (drop); MatMul drops it only when its output
// overlaps the cached rows, so q, k and v share one quantisation of their input.
type q8Cache struct {
	x          cuda.DevicePtr // source rows; 0 = nothing cached
	rows, cols int
	xq         cuda.DevicePtr
}

func (c *q8Cache) drop() { c.x = 0 }

// dropIfOverlaps forgets the cached rows if [p, p+n bytes) overlaps their source.
func (c *q8Cache) dropIfOverlaps(p cuda.DevicePtr, n int) {
	if c.x == 0 {
		return
	}
	end, srcEnd := p.Add(n), c.x.Add(4*c.rows*c.cols)
	if p < srcEnd && c.x < end {
		c.x = 0
	}
}

// quantized returns rows x cols floats at x quantised by QuantizeQ8 (rows Q8RowBytes(cols)
// apart), reusing the last quantisation when it is of the same rows; 0 on error (recorded).
func (b *Backend) quantized(x cuda.DevicePtr, rows, cols int) cuda.DevicePtr {
	if c := &b.q8; c.x == x && c.rows == rows && c.cols == cols {
		return c.xq
	}
	xq := b.scratchBuf("q8 x", rows*cuda.Q8RowBytes(cols))
	if xq == 0 {
		return 0
	}
	b.quantize(x, xq, rows, cols)
	b.q8 = q8Cache{x: x, rows: rows, cols: cols, xq: xq}
	return xq
}

// quantize queues QuantizeQ8 of rows x cols floats at x into xq.
func (b *Backend) quantize(x, xq cuda.DevicePtr, rows, cols int) {
	b.do(func() error { return b.k.QuantizeQ8(b.s, x, xq, rows, cols) }, opQuantize, u(x), u(xq), uint64(rows), uint64(cols))
}

// q8Capable reports whether w's products can take 8-bit activations (MatVecQ8, the fused
// MoE kernels): a type with a dp4a kernel and rows whose length QuantizeQ8 can cut.
func q8Capable(w *Weight) bool {
	return cuda.QuantType(w.typ).HasQ8MatVec() && w.cols%32 == 0
}

// MatMul: dst[n x rows] = x[n x cols] · wᵀ.
func (b *Backend) MatMul(dst compute.Buf, wt compute.Weight, x compute.Buf, n int) {
	w := wt.(*Weight)
	b.matmul(w, w.p, dev(x), dev(dst), n)
	b.q8.dropIfOverlaps(dev(dst), 4*n*w.rows)
}

// MatMuls runs the products one after another; they share one quantised copy of x.
func (b *Backend) MatMuls(dst []compute.Buf, ws []compute.Weight, x compute.Buf, n int) {
	for i, w := range ws {
		b.MatMul(dst[i], w, x, n)
	}
}

// matmul multiplies n rows of x by one matrix at wp (a plain weight or one expert). One
// row (decode) takes the 8-bit-activation matvec where the type has one (about twice the
// f32-activation kernel's speed on the H200, cuda/BENCH.md); a batch takes the tensor-core
// GEMM on an f16 copy of the weight (faster than GemmQ at prefill sizes: 43.7 against
// 65.1 us for Q4_K 2048 x 512 x 2048), or GemmQ when that copy would be too large.
func (b *Backend) matmul(w *Weight, wp, x, y cuda.DevicePtr, n int) {
	t := cuda.QuantType(w.typ)
	if n == 1 {
		if q8Capable(w) {
			if xq := b.quantized(x, 1, w.cols); xq != 0 {
				b.do(func() error { return b.k.MatVecQ8(b.s, t, wp, xq, y, w.rows, w.cols) },
					opMatVecQ8, uint64(t), u(wp), u(xq), u(y), uint64(w.rows), uint64(w.cols))
			}
			return
		}
		b.do(func() error { return b.k.MatVec(b.s, t, wp, x, y, w.rows, w.cols) },
			opMatVec, uint64(t), u(wp), u(x), u(y), uint64(w.rows), uint64(w.cols))
		return
	}
	b.step.brk() // batches are prefill: no graph
	need := cuda.GemmScratchBytes(t, w.rows, w.cols)
	if need > gemmScratchLimit {
		b.err.Set(b.k.GemmQ(b.s, t, wp, x, y, w.rows, n, w.cols))
		return
	}
	scratch := cuda.DevicePtr(0)
	if need > 0 {
		scratch = b.scratchBuf("gemm", need)
		if scratch == 0 {
			return // the allocation error is recorded
		}
	}
	b.err.Set(b.k.Gemm(b.s, t, wp, x, y, w.rows, n, w.cols, scratch))
}

func f32Bytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

func u16Bytes(h []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h))
}
