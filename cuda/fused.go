package cuda

import "fmt"

// fusedKernelNames lists fused.cu's kernels for kernelNames.
func fusedKernelNames() []string { return []string{"rms_norm_q8", "qk_norm_rope"} }

// normBlock is the block rms_norm runs a row of dim values with; the fused norms use the
// same, so their sums of squares (and so their results) are rms_norm's.
func normBlock(dim int) int {
	if dim <= 128 {
		return 32 * ceilDiv(dim, 32)
	}
	return 256
}

// RMSNormQ8Fits reports whether RMSNormQ8 takes rows of dim values: whole groups of 32 (for
// the 8-bit copy), at most 32 per thread of the block.
func RMSNormQ8Fits(dim int) bool { return dim > 0 && dim%32 == 0 && dim <= 32*normBlock(dim) }

// RMSNormQ8 is RMSNorm of x [rows][dim] into y (the same values) that also writes y
// quantised as QuantizeQ8 does into yq (rows Q8RowBytes(dim) apart), in one launch: decode
// norms a row and quantises it for the matvecs that follow. With add (0: none) x first
// becomes the residual sum x + add, written back, as Add would. w may be 0 (no weight); y
// may alias x when add is 0. dim must satisfy RMSNormQ8Fits.
func (k *Kernels) RMSNormQ8(s *Stream, x, add, w, y, yq DevicePtr, rows, dim int, eps float32) error {
	if rows <= 0 || !RMSNormQ8Fits(dim) {
		return fmt.Errorf("cuda: rms_norm_q8: bad shape rows=%d dim=%d (dim a multiple of 32, at most %d)", rows, dim, 32*normBlock(dim))
	}
	if add != 0 && x == y {
		return fmt.Errorf("cuda: rms_norm_q8: the residual sum and the norm share a buffer")
	}
	a := new(Args).Ptr(x).Ptr(add).Ptr(w).Ptr(y).Ptr(yq).Int(dim).Int(Q8RowBytes(dim)).Float(eps)
	return k.launch("rms_norm_q8", s, Dim3{X: rows}, Dim3{X: normBlock(dim)}, 0, a)
}

// KVStore names where QKNormRope also writes k and v: v [tokens][kvHeads][headDim] and
// the f16 caches [slot][kvHeads][headDim] (slot = position, or position % Ring), as
// KVWrite. The zero value stores nothing.
type KVStore struct {
	V, KCache, VCache DevicePtr
	Ring              int
}

// QKNormRope is Qwen3's per-head RMSNorm of q [tokens][heads][headDim] by qw and of k
// [tokens][kvHeads][headDim] by kw (RMSNorm with dim = headDim), then the NeoX rotation of
// the first ropeDim values of each head by the positions pos [tokens] (RopeNeoX), in place
// and in one launch; with st, k (rotated) and v go to the KV cache too.
func (k *Kernels) QKNormRope(s *Stream, q, kk, qw, kw, pos DevicePtr, tokens, heads, kvHeads, headDim, ropeDim int, freqBase, eps float32, st KVStore) error {
	if tokens <= 0 || tokens > 65535 || heads <= 0 || kvHeads <= 0 || headDim <= 0 || ropeDim <= 0 || ropeDim%2 != 0 || ropeDim > headDim || heads+kvHeads > 65535 || st.Ring < 0 {
		return fmt.Errorf("cuda: qk_norm_rope: bad shape tokens=%d heads=%d kv_heads=%d head_dim=%d rope_dim=%d ring=%d", tokens, heads, kvHeads, headDim, ropeDim, st.Ring)
	}
	if (st.KCache == 0) != (st.VCache == 0) || (st.KCache != 0 && st.V == 0) {
		return fmt.Errorf("cuda: qk_norm_rope: a KV store needs v and both caches")
	}
	a := new(Args).Ptr(q).Ptr(kk).Ptr(st.V).Ptr(qw).Ptr(kw).Ptr(pos).Ptr(st.KCache).Ptr(st.VCache).Int(st.Ring).
		Int(heads).Int(kvHeads).Int(headDim).Int(ropeDim).Float(freqBase).Float(eps)
	return k.launch("qk_norm_rope", s, Dim3{X: tokens, Y: heads + kvHeads}, Dim3{X: normBlock(headDim)}, 4*headDim, a)
}
