package gpu

import (
	"sort"

	"strata/cuda"
	"strata/engine/compute"
)

// MoE adds the routed experts' SwiGLU outputs to dst. One token (decode) runs the k experts
// as one launch per matrix; a batch (prefill) sorts the token slots by expert, gathers their
// rows, runs one GEMM per expert and matrix, and gathers the results back into slot order.
func (b *Backend) MoE(dst, x compute.Buf, gate, up, down compute.Weight, r *compute.Routes) {
	G, U, D := gate.(*Weight), up.(*Weight), down.(*Weight)
	H, F := G.cols, G.rows
	slots := r.N * r.K
	ids := b.scratchBuf("moe ids", 4*slots)
	weights := b.scratchBuf("moe weights", 4*slots)
	g := b.scratchBuf("moe gate", 4*slots*F)
	u := b.scratchBuf("moe up", 4*slots*F)
	out := b.scratchBuf("moe out", 4*slots*H)
	if ids == 0 || weights == 0 || g == 0 || u == 0 || out == 0 {
		return // the allocation error is recorded
	}
	b.err.set(cuda.Upload(b.s, weights, r.Weights))
	if r.N == 1 {
		b.err.set(cuda.Upload(b.s, ids, r.IDs))
		gs, us, ds := G.rows*G.rowBytes, U.rows*U.rowBytes, D.rows*D.rowBytes
		b.err.set(b.k.MatVecExperts(b.s, cuda.QuantType(G.typ), G.p, gs, ids, slots, dev(x), false, g, F, H))
		b.err.set(b.k.MatVecExperts(b.s, cuda.QuantType(U.typ), U.p, us, ids, slots, dev(x), false, u, F, H))
		b.err.set(b.k.SwiGLU(b.s, g, u, g, slots*F))
		b.err.set(b.k.MatVecExperts(b.s, cuda.QuantType(D.typ), D.p, ds, ids, slots, g, true, out, H, F))
		b.err.set(b.k.MoECombine(b.s, out, weights, dev(dst), 1, r.K, H, true))
		return
	}

	// Sort slots by expert: order[i] is the slot at sorted row i.
	order := make([]int, slots)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return r.IDs[order[i]] < r.IDs[order[j]] })
	tokenOf := make([]int32, slots)   // sorted row -> token, to gather x
	rowOfSlot := make([]int32, slots) // slot -> sorted row, to gather the outputs back
	for i, s := range order {
		tokenOf[i] = int32(s / r.K)
		rowOfSlot[s] = int32(i)
	}
	xs := b.scratchBuf("moe x", 4*slots*H)
	sorted := b.scratchBuf("moe sorted out", 4*slots*H)
	if xs == 0 || sorted == 0 {
		return
	}
	b.err.set(cuda.Upload(b.s, ids, tokenOf))
	b.err.set(b.k.GetRows(b.s, cuda.F32, dev(x), ids, slots, xs, H))
	for lo := 0; lo < slots; {
		e := int(r.IDs[order[lo]])
		hi := lo
		for hi < slots && int(r.IDs[order[hi]]) == e {
			hi++
		}
		n := hi - lo
		b.matmul(G, G.expert(e), xs.Add(4*lo*H), g.Add(4*lo*F), n)
		b.matmul(U, U.expert(e), xs.Add(4*lo*H), u.Add(4*lo*F), n)
		b.err.set(b.k.SwiGLU(b.s, g.Add(4*lo*F), u.Add(4*lo*F), g.Add(4*lo*F), n*F))
		b.matmul(D, D.expert(e), g.Add(4*lo*F), sorted.Add(4*lo*H), n)
		lo = hi
	}
	// The ids buffer is reused for the second gather only after the first one ran: stream order.
	b.err.set(cuda.Upload(b.s, ids, rowOfSlot))
	b.err.set(b.k.GetRows(b.s, cuda.F32, sorted, ids, slots, out, H))
	b.err.set(b.k.MoECombine(b.s, out, weights, dev(dst), r.N, r.K, H, true))
}

// Route downloads the router logits and routes on the host. (Routing on the device, so that
// decode needs no synchronisation per layer, is the next step: RouterTopK exists.)
func (b *Backend) Route(logits compute.Buf, n, experts, k int, norm bool) *compute.Routes {
	host := make([]float32, n*experts)
	b.err.set(cuda.Download(b.s, host, dev(logits)))
	return compute.RouteHost(host, n, experts, k, norm)
}
