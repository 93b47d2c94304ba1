package gpu

import (
	"fmt"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
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

// MatMuls runs the products one after another; they share one quantised copy of x, and in
// decode those of one type and width run in one launch (up to three: q, k and v).
func (b *Backend) MatMuls(dst []compute.Buf, ws []compute.Weight, x compute.Buf, n int) {
	b.MatMulsBias(dst, ws, nil, x, n)
}

// MatMulsBias is MatMuls with bias[i] (nil or missing: none) added to each row of dst[i]
// (compute.BiasedMatMuls); in decode the 8-bit kernels add them in the products' launch.
func (b *Backend) MatMulsBias(dst []compute.Buf, ws []compute.Weight, bias []compute.Weight, x compute.Buf, n int) {
	biasOf := func(i int) *Weight {
		if i >= len(bias) || bias[i] == nil {
			return nil
		}
		return bias[i].(*Weight)
	}
	for i := 0; i < len(ws); {
		w := ws[i].(*Weight)
		if n != 1 || !q8Capable(w) {
			bw := biasOf(i)
			if n == 1 && bw != nil && checkBias(bw, w) == nil && w.exps == 1 {
				// the f32-activation matvec (the router) adds it in its launch
				t, wp, xp, y := cuda.QuantType(w.typ), w.p, dev(x), dev(dst[i])
				b.do(func() error { return b.k.MatVecBias(b.s, t, wp, xp, y, bw.p, w.rows, w.cols) },
					opMatVec, uint64(t), u(wp), u(xp), u(y), uint64(w.rows), uint64(w.cols), u(bw.p))
				b.q8.dropIfOverlaps(y, 4*w.rows)
				i++
				continue
			}
			b.MatMul(dst[i], w, x, n)
			if bw != nil {
				b.AddBias(dst[i], bw, n)
			}
			i++
			continue
		}
		// the run of products from i that share w's type and width, three at most
		var outs []cuda.MatVecQ8Out
		j := i
		for ; j < len(ws) && len(outs) < 3; j++ {
			wj := ws[j].(*Weight)
			if wj.typ != w.typ || wj.cols != w.cols || !q8Capable(wj) {
				break
			}
			o := cuda.MatVecQ8Out{W: wj.p, Y: dev(dst[j]), Rows: wj.rows}
			if bw := biasOf(j); bw != nil {
				if err := checkBias(bw, wj); err != nil {
					b.err.Set(err)
					return
				}
				o.Bias = bw.p
			}
			outs = append(outs, o)
		}
		b.matVecsQ8(cuda.QuantType(w.typ), dev(x), w.cols, outs)
		for k := i; k < j; k++ {
			b.q8.dropIfOverlaps(dev(dst[k]), 4*ws[k].(*Weight).rows)
		}
		i = j
	}
}

// checkBias checks that bias is a float32 vector of w's output size.
func checkBias(bias, w *Weight) error {
	if bias.rows != 1 || bias.exps != 1 || bias.typ != quant.F32 || bias.cols != w.rows {
		return fmt.Errorf("gpu: bias %q is not a float32 vector of %d values for %q", bias.name, w.rows, w.name)
	}
	return nil
}

// matVecsQ8 queues MatVecsQ8 of outs on x's quantised copy.
func (b *Backend) matVecsQ8(t cuda.QuantType, x cuda.DevicePtr, cols int, outs []cuda.MatVecQ8Out) {
	xq := b.quantized(x, 1, cols)
	if xq == 0 {
		return
	}
	sig := []uint64{opMatVecQ8, uint64(t), u(xq), uint64(cols)}
	for _, o := range outs {
		sig = append(sig, u(o.W), u(o.Y), u(o.Bias), uint64(o.Rows))
	}
	b.do(func() error { return b.k.MatVecsQ8(b.s, t, xq, cols, outs...) }, sig...)
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
			b.matVecsQ8(t, x, w.cols, []cuda.MatVecQ8Out{{W: wp, Y: y, Rows: w.rows}})
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
