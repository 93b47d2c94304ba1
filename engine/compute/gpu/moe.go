package gpu

import (
	"fmt"
	"math"

	"strata/cuda"
	"strata/engine/compute"
)

// moeChunkTokens bounds the tokens of one grouped MoE pass, so slot counts stay within the
// kernels' 65535-row launches and the scratch stays modest.
const moeChunkTokens = 4096

// MoE adds the routed experts' SwiGLU outputs to dst. One token (decode) runs the fused
// 8-bit kernels on the device's routing result: gate and up in one launch, then down with
// the router weights and the add into dst in another. A batch (prefill) groups its slots by
// expert on the host and runs one grouped GEMM launch per matrix for all experts.
func (b *Backend) MoE(dst, x compute.Buf, gate, up, down compute.Weight, ffn *compute.ExpertFFN, r *compute.Routes) {
	if ffn != nil {
		b.err.Set(notBuilt("the MoE with expert biases and the clamped SwiGLU (gpt-oss) is"))
		return
	}
	G, U, D := gate.(*Weight), up.(*Weight), down.(*Weight)
	defer b.q8.dropIfOverlaps(dev(dst), 4*r.N*D.rows)
	if r.N <= 0 || r.K <= 0 {
		return
	}
	if r.N == 1 {
		b.moeDecode(dev(dst), dev(x), G, U, D, r)
		return
	}
	b.step.brk() // batches are prefill: no graph
	if len(r.IDs) < r.N*r.K || len(r.Weights) < r.N*r.K {
		b.err.Set(fmt.Errorf("gpu: moe: routes hold %d ids and %d weights for %d x %d slots", len(r.IDs), len(r.Weights), r.N, r.K))
		return
	}
	if err := checkIDs(r.IDs[:r.N*r.K], G.exps); err != nil {
		b.err.Set(err)
		return
	}
	H := G.cols
	step := max(1, min(moeChunkTokens, 65535/r.K))
	for t0 := 0; t0 < r.N; t0 += step {
		n := min(step, r.N-t0)
		lo, hi := t0*r.K, (t0+n)*r.K
		b.moePrefill(dev(dst).Add(4*t0*H), dev(x).Add(4*t0*H), G, U, D, n, r.K, r.IDs[lo:hi], r.Weights[lo:hi])
	}
}

// fusedGateUp reports whether gate and up can share the fused 8-bit kernel.
func fusedGateUp(G, U *Weight) bool {
	return q8Capable(G) && G.typ == U.typ && G.rows == U.rows && G.cols == U.cols && G.rowBytes == U.rowBytes && G.stride == U.stride
}

// moeDecode runs one token's k experts.
func (b *Backend) moeDecode(dst, x cuda.DevicePtr, G, U, D *Weight, r *compute.Routes) {
	H, F, K := G.cols, G.rows, r.K
	ids, weights := b.deviceRoutes(r, G.exps)
	h := b.scratchBuf("moe gate", 4*K*F)
	if ids == 0 || weights == 0 || h == 0 {
		return // the error is recorded
	}
	gs, us, ds := G.stride, U.stride, D.stride
	if fusedGateUp(G, U) {
		xq := b.quantized(x, 1, H)
		if xq == 0 {
			return
		}
		t := cuda.QuantType(G.typ)
		b.do(func() error { return b.k.MoEGateUp(b.s, t, G.p, U.p, gs, ids, K, xq, h, F, H) },
			opGateUp, uint64(t), u(G.p), u(U.p), uint64(gs), u(ids), uint64(K), u(xq), u(h), uint64(F), uint64(H))
	} else {
		up := b.scratchBuf("moe up", 4*K*F)
		if up == 0 {
			return
		}
		b.matVecExperts(G, gs, ids, K, x, false, h)
		b.matVecExperts(U, us, ids, K, x, false, up)
		b.do(func() error { return b.k.SwiGLU(b.s, h, up, h, K*F) }, opSwiGLU, u(h), u(up), uint64(K*F))
	}
	// h [K][F] -> dst [H]: the down projection, weighted by the router and added into dst.
	if q8Capable(D) {
		hq := b.scratchBuf("q8 h", K*cuda.Q8RowBytes(F))
		if hq == 0 {
			return
		}
		b.quantize(h, hq, K, F)
		t := cuda.QuantType(D.typ)
		b.do(func() error { return b.k.MoEDown(b.s, t, D.p, ds, ids, weights, K, hq, dst, H, F) },
			opMoEDown, uint64(t), u(D.p), uint64(ds), u(ids), u(weights), uint64(K), u(hq), u(dst), uint64(H), uint64(F))
		return
	}
	out := b.scratchBuf("moe out", 4*K*H)
	if out == 0 {
		return
	}
	b.matVecExperts(D, ds, ids, K, h, true, out)
	b.do(func() error { return b.k.MoECombine(b.s, out, weights, dst, 1, K, H, true) },
		opMoECombine, u(out), u(weights), u(dst), uint64(K), uint64(H))
}

// matVecExperts queues MatVecExperts over w's k routed experts (f32 activations).
func (b *Backend) matVecExperts(w *Weight, stride int, ids cuda.DevicePtr, k int, x cuda.DevicePtr, xPerExpert bool, y cuda.DevicePtr) {
	t := cuda.QuantType(w.typ)
	per := uint64(0)
	if xPerExpert {
		per = 1
	}
	b.do(func() error { return b.k.MatVecExperts(b.s, t, w.p, stride, ids, k, x, xPerExpert, y, w.rows, w.cols) },
		opMatVecExperts, uint64(t), u(w.p), uint64(stride), u(ids), uint64(k), u(x), per, u(y), uint64(w.rows), uint64(w.cols))
}

// moePrefill runs n tokens' k experts each: the n*k slots sorted by expert, one grouped
// GEMM launch per matrix over every routed expert, the outputs gathered back into slot
// order and summed with the router weights into dst.
func (b *Backend) moePrefill(dst, x cuda.DevicePtr, G, U, D *Weight, n, K int, ids []int32, weights []float32) {
	H, F := G.cols, G.rows
	plan := groupByExpert(ids, G.exps)
	slots, groups := len(ids), len(plan.experts)

	// One upload: expert of each group, group offsets, token of each sorted row, sorted
	// row identity (down reads its own rows), sorted row of each slot, router weights.
	idx := make([]uint32, 0, groups+(groups+1)+4*slots)
	for _, e := range plan.experts {
		idx = append(idx, uint32(e))
	}
	for _, o := range plan.offsets {
		idx = append(idx, uint32(o))
	}
	for _, s := range plan.order {
		idx = append(idx, uint32(int(s)/K))
	}
	for i := range slots {
		idx = append(idx, uint32(i))
	}
	for _, r := range plan.rowOfSlot {
		idx = append(idx, uint32(r))
	}
	for _, w := range weights {
		idx = append(idx, math.Float32bits(w))
	}
	ib := b.scratchBuf("moe index", 4*len(idx))
	g := b.scratchBuf("moe gate", 4*slots*F)
	u := b.scratchBuf("moe up", 4*slots*F)
	sorted := b.scratchBuf("moe sorted out", 4*slots*H)
	out := b.scratchBuf("moe out", 4*slots*H)
	if ib == 0 || g == 0 || u == 0 || sorted == 0 || out == 0 {
		return // the allocation error is recorded
	}
	if err := cuda.Upload(b.s, ib, idx); err != nil {
		b.err.Set(fmt.Errorf("gpu: moe: upload expert groups: %w", err))
		return
	}
	slotExpert := ib
	slotOff := slotExpert.Add(4 * groups)
	rowTok := slotOff.Add(4 * (groups + 1))
	rowSelf := rowTok.Add(4 * slots)
	rowOfSlot := rowSelf.Add(4 * slots)
	wts := rowOfSlot.Add(4 * slots)

	gs, us, ds := G.stride, U.stride, D.stride
	b.err.Set(b.k.GemmExperts(b.s, cuda.QuantType(G.typ), G.p, gs, slotExpert, slotOff, rowTok, groups, plan.maxRows, x, g, F, H))
	b.err.Set(b.k.GemmExperts(b.s, cuda.QuantType(U.typ), U.p, us, slotExpert, slotOff, rowTok, groups, plan.maxRows, x, u, F, H))
	b.err.Set(b.k.SwiGLU(b.s, g, u, g, slots*F))
	b.err.Set(b.k.GemmExperts(b.s, cuda.QuantType(D.typ), D.p, ds, slotExpert, slotOff, rowSelf, groups, plan.maxRows, g, sorted, H, F))
	b.err.Set(b.k.GetRows(b.s, cuda.F32, sorted, rowOfSlot, slots, out, H))
	b.err.Set(b.k.MoECombine(b.s, out, wts, dst, n, K, H, true))
}

// expertGroups is a batch's slots sorted by expert (stable: slot order within an expert).
type expertGroups struct {
	experts   []int32 // the distinct experts, ascending
	offsets   []int32 // group g is sorted rows offsets[g] .. offsets[g+1]
	order     []int32 // sorted row -> slot
	rowOfSlot []int32 // slot -> sorted row
	maxRows   int     // the largest group
}

// groupByExpert counting-sorts the slots by expert id (ids already checked in range).
func groupByExpert(ids []int32, experts int) expertGroups {
	count := make([]int32, experts+1)
	for _, e := range ids {
		count[e+1]++
	}
	var g expertGroups
	for e := range experts {
		if c := count[e+1]; c > 0 {
			g.experts = append(g.experts, int32(e))
			g.offsets = append(g.offsets, count[e])
			g.maxRows = max(g.maxRows, int(c))
		}
		count[e+1] += count[e]
	}
	g.offsets = append(g.offsets, int32(len(ids)))
	g.order = make([]int32, len(ids))
	g.rowOfSlot = make([]int32, len(ids))
	next := count[:experts] // next free sorted row of each expert
	for s, e := range ids {
		row := next[e]
		next[e]++
		g.order[row] = int32(s)
		g.rowOfSlot[s] = row
	}
	return g
}
