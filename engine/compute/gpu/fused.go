package gpu

import (
	"math"

	"strata/cuda"
	"strata/engine/compute"
)

// Op codes of the fused decode ops (apart from the list in gpu.go).
const (
	opRMSNormQ8 uint64 = 1000 + iota
	opQKNormRope
)

// normQ8 runs a one-row RMSNorm (after adding add into x, when add is not nil) as
// rms_norm_q8, which also quantises the row to 8 bits for the matvecs that read it next (q,
// k and v after the attention norm, the experts after the FFN norm, the output matrix after
// the last): their quantized finds it cached. It reports false, having queued nothing, when
// the row does not fit the fused kernel.
func (b *Backend) normQ8(dst, x, add compute.Buf, w *Weight, eps float32) bool {
	dim := w.cols
	if !cuda.RMSNormQ8Fits(dim) {
		return false
	}
	xq := b.scratchBuf("q8 x", cuda.Q8RowBytes(dim))
	if xq == 0 {
		return true // the allocation error is recorded
	}
	xp, yp, ap := dev(x), dev(dst), cuda.DevicePtr(0)
	if add != nil {
		ap = dev(add)
	}
	b.do(func() error { return b.k.RMSNormQ8(b.s, xp, ap, w.p, yp, xq, 1, dim, eps) },
		opRMSNormQ8, u(xp), u(ap), u(w.p), u(yp), u(xq), uint64(dim), uint64(math.Float32bits(eps)))
	b.q8 = q8Cache{x: yp, rows: 1, cols: dim, xq: xq}
	return true
}

// AddRMSNorm is compute.AddNorm: one launch for a decode row, else Add and RMSNorm.
func (b *Backend) AddRMSNorm(x, add, dst compute.Buf, wt compute.Weight, rows int, eps float32) {
	w := wt.(*Weight)
	b.q8.drop()
	if rows == 1 && dev(x) != dev(dst) && b.normQ8(dst, x, add, w, eps) {
		return
	}
	b.Add(x, add, rows*w.cols)
	b.RMSNorm(dst, x, wt, rows, eps)
}

// NormRoPENeoXStore is compute.NormRoPE: q/k norm, RoPE and the KV store in one launch (an
// int8 cache is stored by StoreKV after).
func (b *Backend) NormRoPENeoXStore(q, k, v compute.Buf, qNorm, kNorm compute.Weight, c compute.KV, layer, pos0, n, heads, kvHeads, headDim int, base, eps float32) {
	qw, kw, kv := qNorm.(*Weight), kNorm.(*Weight), c.(*KV)
	pos := b.positions(nil, pos0, n)
	b.q8.drop()
	qp, kp := dev(q), dev(k)
	st := cuda.KVStore{V: dev(v), KCache: kv.k[layer], VCache: kv.v[layer], Ring: kv.ring[layer]}
	if kv.int8 { // the kernel stores f16: an int8 cache takes StoreKV's own quantisation after
		st = cuda.KVStore{}
		defer b.StoreKV(c, layer, pos0, n, k, v)
	}
	b.do(func() error {
		return b.k.QKNormRope(b.s, qp, kp, qw.p, kw.p, pos, n, heads, kvHeads, headDim, headDim, base, eps, st)
	}, opQKNormRope, u(qp), u(kp), u(qw.p), u(kw.p), u(pos), uint64(n), uint64(heads), uint64(kvHeads), uint64(headDim),
		uint64(math.Float32bits(base)), uint64(math.Float32bits(eps)), u(st.V), u(st.KCache), u(st.VCache), uint64(st.Ring))
}
