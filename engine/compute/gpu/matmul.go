package gpu

import (
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
)

// gemmScratchLimit caps the float16 copy of one weight a batched product dequantises into;
// bigger weights (the output matrix) run as one matrix-vector product per token instead.
const gemmScratchLimit = 256 << 20

// MatMul: dst[n x rows] = x[n x cols] · wᵀ.
func (b *Backend) MatMul(dst compute.Buf, wt compute.Weight, x compute.Buf, n int) {
	w := wt.(*Weight)
	b.matmul(w, w.p, dev(x), dev(dst), n)
}

// matmul multiplies n rows of x by one matrix at wp (a plain weight or one expert).
func (b *Backend) matmul(w *Weight, wp, x, y cuda.DevicePtr, n int) {
	t := cuda.QuantType(w.typ)
	if n == 1 {
		b.err.set(b.k.MatVec(b.s, t, wp, x, y, w.rows, w.cols))
		return
	}
	need := cuda.GemmScratchBytes(t, w.rows, w.cols)
	if need > gemmScratchLimit {
		for i := range n {
			b.err.set(b.k.MatVec(b.s, t, wp, x.Add(4*i*w.cols), y.Add(4*i*w.rows), w.rows, w.cols))
		}
		return
	}
	scratch := cuda.DevicePtr(0)
	if need > 0 {
		scratch = b.scratchBuf("gemm", need)
	}
	b.err.set(b.k.Gemm(b.s, t, wp, x, y, w.rows, n, w.cols, scratch))
}

func f32Bytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

func u16Bytes(h []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h))
}
