package compute

// NormRoPE is an optional Backend op: Qwen3's per-head RMSNorm of q and k by their weights,
// the NeoX rotation of whole heads at positions pos0.., and the store of k and v into the
// KV cache, in one step. The result is RMSNorm of q (rows n*heads of headDim) and of k
// (n*kvHeads), RoPENeoX of each, then StoreKV; the GPU runs it as one launch where those
// ops took six.
type NormRoPE interface {
	NormRoPENeoXStore(q, k, v Buf, qNorm, kNorm Weight, kv KV, layer, pos0, n, heads, kvHeads, headDim int, base, eps float32)
}

// AddNorm is an optional Backend op: the residual sum x += add, then dst = RMSNorm(x) by w
// over rows of w's length, in one step (Add then RMSNorm).
type AddNorm interface {
	AddRMSNorm(x, add, dst Buf, w Weight, rows int, eps float32)
}

// BiasedMatMuls is an optional Backend op: MatMuls, then each product's bias vector (nil:
// none) added to each of its n rows, as AddBias would. The GPU adds the biases in the
// products' own launch in decode instead of a launch per bias.
type BiasedMatMuls interface {
	MatMulsBias(dst []Buf, w []Weight, bias []Weight, x Buf, n int)
}
