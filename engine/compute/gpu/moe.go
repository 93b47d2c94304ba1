package gpu

import (
	"fmt"
	"math"
	"slices"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
)

// moeChunkTokens bounds the tokens of one grouped MoE pass, so slot counts stay within the
// kernels' 65535-row launches and the scratch stays modest.
const moeChunkTokens = 4096

// MoE adds the routed experts' SwiGLU outputs to dst. One token (decode) runs the fused
// 8-bit kernels on the device's routing result: gate and up in one launch, then down with
// the router weights and the add into dst in another. A batch (prefill) groups its slots by
// expert on the host and runs one grouped GEMM launch per matrix for all experts.
func (b *Backend) MoE(dst, x compute.Buf, gate, up, down compute.Weight, ffn *compute.ExpertFFN, r *compute.Routes) {
	G, U, D := gate.(*Weight), up.(*Weight), down.(*Weight)
	fb, err := ffnOf(ffn, G.exps, G.rows, D.rows)
	if err != nil {
		b.err.Set(err)
		return
	}
	defer b.q8.dropIfOverlaps(dev(dst), 4*r.N*D.rows)
	if r.N <= 0 || r.K <= 0 {
		return
	}
	if r.N == 1 {
		b.moeDecode(dev(dst), dev(x), G, U, D, fb, r)
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
		b.moePrefill(dev(dst).Add(4*t0*H), dev(x).Add(4*t0*H), G, U, D, fb, n, r.K, r.IDs[lo:hi], r.Weights[lo:hi])
	}
}

// expertFFN is a compute.ExpertFFN on this backend: each bias as a float32 stack in VRAM
// (0: none) with its floats from one expert to the next.
type expertFFN struct {
	gate, up, down                   cuda.DevicePtr
	gateStride, upStride, downStride int
	limit, alpha                     float32
}

// ffnOf checks ffn's biases against experts of f hidden and h output values; nil for nil.
func ffnOf(ffn *compute.ExpertFFN, experts, f, h int) (*expertFFN, error) {
	if ffn == nil {
		return nil, nil
	}
	e := &expertFFN{limit: ffn.Limit, alpha: ffn.Alpha}
	for _, p := range []struct {
		w      compute.Weight
		dst    *cuda.DevicePtr
		stride *int
		n      int
	}{{ffn.GateBias, &e.gate, &e.gateStride, f}, {ffn.UpBias, &e.up, &e.upStride, f}, {ffn.DownBias, &e.down, &e.downStride, h}} {
		if p.w == nil {
			continue
		}
		w := p.w.(*Weight)
		if w.rows != 1 || w.cols != p.n || w.exps != experts || w.typ != quant.F32 {
			return nil, fmt.Errorf("gpu: expert bias %q is %d x %d x %d %s, want %d experts of %d float32", w.name, w.exps, w.rows, w.cols, w.typ, experts, p.n)
		}
		*p.dst, *p.stride = w.p, w.stride/4
	}
	return e, nil
}

// activate adds the gate and up biases to gp and up [rows][f] (row r of expert ids[r]) and
// applies the activation into gp: plain SwiGLU without ffn, else the clamped one when
// ffn.limit > 0.
func (b *Backend) activate(ffn *expertFFN, gp, up, ids cuda.DevicePtr, rows, f int) {
	if ffn == nil {
		b.do(func() error { return b.k.SwiGLU(b.s, gp, up, gp, rows*f) }, opSwiGLU, u(gp), u(up), uint64(rows*f))
		return
	}
	b.expertBias(gp, ffn.gate, ffn.gateStride, ids, rows, f)
	b.expertBias(up, ffn.up, ffn.upStride, ids, rows, f)
	if ffn.limit <= 0 {
		b.do(func() error { return b.k.SwiGLU(b.s, gp, up, gp, rows*f) }, opSwiGLU, u(gp), u(up), uint64(rows*f))
		return
	}
	limit, alpha := ffn.limit, ffn.alpha
	b.do(func() error { return b.k.SwiGLUClamped(b.s, gp, up, gp, rows*f, limit, alpha) },
		opSwiGLU, u(gp), u(up), uint64(rows*f), uint64(math.Float32bits(limit)), uint64(math.Float32bits(alpha)))
}

// expertBias adds expert ids[r]'s bias (0: none) to row r of x [rows][n].
func (b *Backend) expertBias(x, bias cuda.DevicePtr, stride int, ids cuda.DevicePtr, rows, n int) {
	if bias == 0 {
		return
	}
	b.do(func() error { return b.k.ExpertBias(b.s, x, bias, ids, rows, n, stride) },
		opExpertBias, u(x), u(bias), uint64(stride), u(ids), uint64(rows), uint64(n))
}

// fusedGateUp reports whether gate and up can share the fused 8-bit kernel.
func fusedGateUp(G, U *Weight) bool {
	return q8Capable(G) && G.typ == U.typ && G.rows == U.rows && G.cols == U.cols && G.rowBytes == U.rowBytes && G.stride == U.stride
}

// moeDecode runs one token's k experts.
func (b *Backend) moeDecode(dst, x cuda.DevicePtr, G, U, D *Weight, ffn *expertFFN, r *compute.Routes) {
	H, F, K := G.cols, G.rows, r.K
	ids, weights := b.deviceRoutes(r, G.exps)
	h := b.scratchBuf("moe gate", 4*K*F)
	if ids == 0 || weights == 0 || h == 0 {
		return // the error is recorded
	}
	gs, us, ds := G.stride, U.stride, D.stride
	var gx, dx cuda.MoEExtras // gpt-oss's biases and clamped SwiGLU, in the fused kernels
	if ffn != nil {
		gx = cuda.MoEExtras{Gate: ffn.gate, Up: ffn.up, Stride: max(ffn.gateStride, ffn.upStride), Limit: ffn.limit, Alpha: ffn.alpha}
		if ffn.limit <= 0 {
			gx.Alpha = 1
		}
		dx = cuda.MoEExtras{Down: ffn.down, Stride: ffn.downStride}
	}
	// the fused kernel reads both bias stacks with one stride
	sameStride := ffn == nil || ffn.gate == 0 || ffn.up == 0 || ffn.gateStride == ffn.upStride
	if fusedGateUp(G, U) && sameStride {
		xq := b.quantized(x, 1, H)
		if xq == 0 {
			return
		}
		t := cuda.QuantType(G.typ)
		b.do(func() error { return b.k.MoEGateUp(b.s, t, G.p, U.p, gs, ids, K, xq, h, F, H, gx) },
			opGateUp, uint64(t), u(G.p), u(U.p), uint64(gs), u(ids), uint64(K), u(xq), u(h), uint64(F), uint64(H),
			u(gx.Gate), u(gx.Up), uint64(gx.Stride), uint64(math.Float32bits(gx.Limit)), uint64(math.Float32bits(gx.Alpha)))
	} else {
		up := b.scratchBuf("moe up", 4*K*F)
		if up == 0 {
			return
		}
		b.matVecExperts(G, gs, ids, K, x, false, h)
		b.matVecExperts(U, us, ids, K, x, false, up)
		b.activate(ffn, h, up, ids, K, F)
	}
	// h [K][F] -> dst [H]: the down projection, weighted by the router and added into dst.
	if q8Capable(D) {
		hq := b.scratchBuf("q8 h", K*cuda.Q8RowBytes(F))
		if hq == 0 {
			return
		}
		b.quantize(h, hq, K, F)
		t := cuda.QuantType(D.typ)
		b.do(func() error { return b.k.MoEDown(b.s, t, D.p, ds, ids, weights, K, hq, dst, H, F, dx) },
			opMoEDown, uint64(t), u(D.p), uint64(ds), u(ids), u(weights), uint64(K), u(hq), u(dst), uint64(H), uint64(F), u(dx.Down), uint64(dx.Stride))
		return
	}
	out := b.scratchBuf("moe out", 4*K*H)
	if out == 0 {
		return
	}
	b.matVecExperts(D, ds, ids, K, h, true, out)
	if ffn != nil {
		b.expertBias(out, ffn.down, ffn.downStride, ids, K, H)
	}
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
func (b *Backend) moePrefill(dst, x cuda.DevicePtr, G, U, D *Weight, ffn *expertFFN, n, K int, ids []int32, weights []float32) {
	H, F := G.cols, G.rows
	plan := groupByExpert(ids, G.exps)
	slots, groups := len(ids), len(plan.experts)

	// One upload: expert of each group, group offsets, token of each sorted row, sorted
	// row identity (down reads its own rows), sorted row of each slot, router weights,
	// expert of each sorted row (for the biases).
	idx := make([]uint32, 0, groups+(groups+1)+5*slots)
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
	for _, s := range plan.order {
		idx = append(idx, uint32(ids[s]))
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
	rowExpert := wts.Add(4 * slots)

	gemm := func(w *Weight, rowIdx, in, inQ, out cuda.DevicePtr) {
		t := cuda.QuantType(w.typ)
		if inQ != 0 && t.HasGemmQ8() {
			b.err.Set(b.k.GemmExpertsQ8(b.s, t, w.p, w.stride, slotExpert, slotOff, rowIdx, groups, plan.maxRows, slots, inQ, out, w.rows, w.cols))
			return
		}
		b.err.Set(b.k.GemmExperts(b.s, t, w.p, w.stride, slotExpert, slotOff, rowIdx, groups, plan.maxRows, in, out, w.rows, w.cols))
	}
	xq := b.quantizedSums("moe x q8", x, n, H, G, U)
	gemm(G, rowTok, x, xq, g)
	gemm(U, rowTok, x, xq, u)
	b.activate(ffn, g, u, rowExpert, slots, F)
	b.step.brk() // activate's ops go through the step recorder; run them before the direct launches
	gemm(D, rowSelf, g, b.quantizedSums("moe h q8", g, slots, F, D), sorted)
	if ffn != nil {
		b.expertBias(sorted, ffn.down, ffn.downStride, rowExpert, slots, H)
		b.step.brk()
	}
	b.err.Set(b.k.GetRows(b.s, cuda.F32, sorted, rowOfSlot, slots, out, H))
	b.err.Set(b.k.MoECombine(b.s, out, wts, dst, n, K, H, true))
}

// quantizedSums quantises rows x cols floats at x by QuantizeQ8Sums into the scratch buffer
// name when one of ws takes the integer GEMM, and returns it (0: none does, or the
// allocation failed, recorded).
func (b *Backend) quantizedSums(name string, x cuda.DevicePtr, rows, cols int, ws ...*Weight) cuda.DevicePtr {
	if !b.gemmQ8 || cols%32 != 0 || !slices.ContainsFunc(ws, func(w *Weight) bool { return cuda.QuantType(w.typ).HasGemmQ8() }) {
		return 0
	}
	rb := cuda.Q8SumsRowBytes(cols)
	xq := b.scratchBuf(name, rows*rb)
	if xq == 0 {
		return 0
	}
	const chunk = 65535 // QuantizeQ8Sums' rows a launch
	for r := 0; r < rows; r += chunk {
		c := min(chunk, rows-r)
		b.err.Set(b.k.QuantizeQ8Sums(b.s, x.Add(4*r*cols), xq.Add(r*rb), c, cols))
	}
	return xq
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
