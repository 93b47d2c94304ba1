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

// Router is an optional Backend op: a MoE router in one step. The router's logits of the
// normed rows x by w (plus bias when it is not nil) go into logits, then RouteTopK of them
// (topKFirst) or Route (norm). It returns nil, having done nothing, when it does not take
// the shape; the caller then runs MatMul, AddBias and the routing op by op.
type Router interface {
	RouteRows(logits, x Buf, w, bias Weight, n, experts, k int, topKFirst, norm bool) *Routes
}

// RoPEStore is an optional Backend op: RoPE of q's heads and k's by r's table at positions
// pos0.., then StoreKV of k and v, in one step (gpt-oss's attention: four launches as one).
type RoPEStore interface {
	RoPEStore(q, k, v Buf, r *Rope, kv KV, layer, pos0, n, heads, kvHeads, headDim int)
}
