package gpu

import (
	"fmt"
	"math"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
)

// The operations of compute.Hybrid on the GPU: what the Gated DeltaNet hybrids (qwen35moe,
// qwen3next) need beyond a plain MoE transformer, on the kernels of cuda/kernels/deltanet.cu.
// The recurrent state (the conv's last inputs and the delta rule's S per layer) is made of
// the model's Bufs, so it lives in VRAM with the session, and its checkpoints are device
// copies (Copy).

var _ compute.Hybrid = (*Backend)(nil)

// l2NormEps is the delta rule's q/k L2 norm epsilon (transformers' and llama.cpp's 1e-6).
const l2NormEps = 1e-6

// CausalConv1D convolves each channel over time with its taps, the state standing in for the
// inputs before the first row and left holding the last ones.
func (b *Backend) CausalConv1D(dst, x, state compute.Buf, wt compute.Weight, n int) {
	w := wt.(*Weight)
	C, K := w.rows, w.cols
	switch {
	case n <= 0:
		return
	case w.exps != 1 || K < 2 || K > cuda.ConvMaxTaps:
		b.err.Set(fmt.Errorf("gpu: conv1d %q: %d x %d x %d taps (2 to %d per channel)", w.name, w.exps, C, K, cuda.ConvMaxTaps))
		return
	case x.Len() < n*C || dst.Len() < n*C || state.Len() < (K-1)*C:
		b.err.Set(fmt.Errorf("gpu: conv1d %q: buffers of %d, %d and %d values for %d tokens of %d channels and a state of %d", w.name, x.Len(), dst.Len(), state.Len(), n, C, (K-1)*C))
		return
	}
	taps, f16, err := b.convTaps(w)
	if err != nil {
		b.err.Set(err)
		return
	}
	b.q8.drop()
	xp, yp, sp, half := dev(x), dev(dst), dev(state), uint64(0)
	if f16 {
		half = 1
	}
	b.do(func() error { return b.k.Conv1DCausal(b.s, xp, yp, sp, taps, f16, n, C, K) },
		opConv1D, u(xp), u(yp), u(sp), u(taps), half, uint64(n), uint64(C), uint64(K))
}

// convTaps returns the conv weight as the kernel reads it: f32 or f16 as placed, any other
// type decoded to f16 once (a conv's taps are a few KiB).
func (b *Backend) convTaps(w *Weight) (cuda.DevicePtr, bool, error) {
	switch w.typ {
	case quant.F32:
		return w.p, false, nil
	case quant.F16:
		return w.p, true, nil
	}
	if p, ok := b.decodedTaps[w]; ok {
		return p, true, nil
	}
	b.step.brk()
	n := w.rows * w.cols
	p, err := b.alloc(2*n, "conv taps "+w.name)
	if err != nil {
		return 0, false, err
	}
	if err := b.k.Dequantize(b.s, cuda.QuantType(w.typ), w.p, p, n); err != nil {
		return 0, false, fmt.Errorf("gpu: conv1d %q: %w", w.name, err)
	}
	if b.decodedTaps == nil {
		b.decodedTaps = map[*Weight]cuda.DevicePtr{}
	}
	b.decodedTaps[w] = p
	return p, true, nil
}

// SiLU applies x·sigmoid(x) in place.
func (b *Backend) SiLU(x compute.Buf, n int) {
	if n <= 0 {
		return
	}
	b.q8.drop()
	xp := dev(x)
	b.do(func() error { return b.k.SiLU(b.s, xp, n) }, opSiLU, u(xp), uint64(n))
}

// MulSigmoid gates dst by sigmoid(gate).
func (b *Backend) MulSigmoid(dst, gate compute.Buf, n int) {
	if n <= 0 {
		return
	}
	b.q8.drop()
	d, g := dev(dst), dev(gate)
	b.do(func() error { return b.k.MulSigmoid(b.s, d, g, n) }, opMulSigmoid, u(d), u(g), uint64(n))
}

// GatedRMSNorm is rmsnorm(x)·w·silu(z) per row of len(w) values.
func (b *Backend) GatedRMSNorm(dst, x, z compute.Buf, wt compute.Weight, rows int, eps float32) {
	w := wt.(*Weight)
	if w.rows != 1 || w.exps != 1 || w.typ != quant.F32 {
		b.err.Set(fmt.Errorf("gpu: gated rms norm: weight %q is not a float32 vector", w.name))
		return
	}
	if rows <= 0 {
		return
	}
	b.q8.drop()
	xp, zp, yp, dim := dev(x), dev(z), dev(dst), w.cols
	b.do(func() error { return b.k.GatedRMSNorm(b.s, xp, zp, w.p, yp, rows, dim, eps) },
		opGatedNorm, u(xp), u(zp), u(w.p), u(yp), uint64(rows), uint64(dim), uint64(math.Float32bits(eps)))
}

// RoPENeoXPartial rotates the first rotDims values of each head (rope_neox takes a rotated
// width below the head size).
func (b *Backend) RoPENeoXPartial(x compute.Buf, n, heads, headDim, rotDims int, positions []int, base float32) {
	pos := b.positions(positions, 0, n)
	b.q8.drop()
	xp := dev(x)
	b.do(func() error { return b.k.RopeNeoX(b.s, xp, pos, n, heads, headDim, rotDims, base) },
		opRopePartial, u(xp), u(pos), uint64(n), uint64(heads), uint64(headDim), uint64(rotDims), uint64(math.Float32bits(base)))
}

// SigmoidRoutes sends every token to expert 0 with weight sigmoid(logit). One token's route
// stays on the device for the MoE that follows (as Route's does, so decode does not stop);
// a batch's goes to the host, where the prefill MoE groups its rows.
func (b *Backend) SigmoidRoutes(logits compute.Buf, n int) *compute.Routes {
	r := &compute.Routes{N: n, K: 1, IDs: make([]int32, n), Weights: make([]float32, n)}
	if n <= 0 {
		return r
	}
	if n > 1 {
		b.step.brk()
		host := make([]float32, n)
		if err := cuda.Download(b.s, host, dev(logits)); err != nil {
			b.err.Set(fmt.Errorf("gpu: shared expert gate: %w", err))
			return r
		}
		for t, v := range host {
			r.Weights[t] = float32(1 / (1 + math.Exp(-float64(v))))
		}
		return r
	}
	off, ok := b.routeSlots(1)
	if !ok {
		return r
	}
	a := &b.routes
	d := &devRoutes{owner: b, ids: a.p.Add(4 * off), weights: a.p.Add(4 * (a.cap + off)), gen: a.gen}
	lp := dev(logits)
	b.do(func() error { return b.k.SigmoidRoutes(b.s, lp, d.ids, d.weights, 1) }, opSigmoidRoutes, u(lp), u(d.ids), u(d.weights))
	r.Dev = d
	a.pending = append(a.pending, pendingRoute{r: r, off: off})
	return r
}

// GatedDeltaNet runs the gated delta rule: q and k L2-normalised into scratch, then the rule
// itself with its state read and written in place: for one token the recurrent kernel
// (gated_delta_rule in deltanet.cu), for a prompt the chunked one (gated_delta_chunked, the
// WY form, which crosses the state once per cuda.DeltaChunk tokens), or the recurrent one
// when the key heads are too large for the chunked kernel's shared memory.
func (b *Backend) GatedDeltaNet(dst, qkv, alpha, beta, state compute.Buf, s compute.DeltaSpec) {
	if err := checkDelta(s, dst, qkv, alpha, beta, state); err != nil {
		b.err.Set(fmt.Errorf("gpu: gated delta rule: %w", err))
		return
	}
	dt, A := s.DtBias.(*Weight), s.A.(*Weight)
	n, C := s.N, s.Channels()
	qkLen := 2 * s.KHeads * s.KDim
	qk := b.scratchBuf("delta qk", 4*n*qkLen)
	if qk == 0 {
		return // the allocation error is recorded
	}
	b.q8.drop()
	in, al, be, st, out := dev(qkv), dev(alpha), dev(beta), dev(state), dev(dst)
	// The norm's grid takes at most 65535 tokens a launch.
	for t0 := 0; t0 < n; t0 += 65535 {
		m := min(65535, n-t0)
		src, y := in.Add(4*t0*C), qk.Add(4*t0*qkLen)
		kh, kd, scale := s.KHeads, s.KDim, s.Scale
		b.do(func() error { return b.k.L2NormQK(b.s, src, C, y, m, kh, kd, scale, l2NormEps) },
			opL2NormQK, u(src), uint64(C), u(y), uint64(m), uint64(kh), uint64(kd), uint64(math.Float32bits(scale)))
	}
	shape := cuda.DeltaShape{Tokens: n, KHeads: s.KHeads, VHeads: s.VHeads, KDim: s.KDim, VDim: s.VDim, Grouped: s.GroupedVHeads}
	v := in.Add(4 * qkLen)
	grouped := uint64(0)
	if s.GroupedVHeads {
		grouped = 1
	}
	rule, chunked := b.k.GatedDeltaRule, uint64(0)
	if n > 1 && s.KDim <= cuda.MaxDeltaChunkedKDim {
		rule, chunked = b.k.GatedDeltaRuleChunked, 1
	}
	b.do(func() error { return rule(b.s, qk, v, C, al, be, dt.p, A.p, st, out, shape) },
		opDeltaRule, u(qk), u(v), uint64(C), u(al), u(be), u(dt.p), u(A.p), u(st), u(out),
		uint64(n), uint64(s.KHeads), uint64(s.VHeads), uint64(s.KDim), uint64(s.VDim), grouped, chunked)
}

// checkDelta checks the spec against the kernels and the buffers, so bad shapes give an
// error naming what is wrong instead of a kernel reading out of bounds.
func checkDelta(s compute.DeltaSpec, dst, qkv, alpha, beta, state compute.Buf) error {
	switch {
	case s.N <= 0 || s.KHeads <= 0 || s.VHeads <= 0 || s.KDim <= 0 || s.VDim <= 0:
		return fmt.Errorf("shape %+v has a zero or negative size", s)
	case s.VHeads%s.KHeads != 0:
		return fmt.Errorf("%d value heads are not a multiple of %d key heads", s.VHeads, s.KHeads)
	case s.KDim > cuda.MaxDeltaKDim:
		return fmt.Errorf("key head size %d: the GPU kernel takes at most %d", s.KDim, cuda.MaxDeltaKDim)
	case s.DtBias == nil || s.A == nil:
		return fmt.Errorf("dt bias or A is missing")
	}
	for _, wt := range []compute.Weight{s.DtBias, s.A} {
		w := wt.(*Weight)
		if w.typ != quant.F32 || w.rows*w.cols*w.exps != s.VHeads {
			return fmt.Errorf("tensor %q is %d x %d %s, want one float32 per value head (%d)", w.name, w.rows, w.cols, w.typ, s.VHeads)
		}
	}
	for _, c := range []struct {
		what string
		b    compute.Buf
		want int
	}{
		{"output", dst, s.N * s.VHeads * s.VDim}, {"qkv", qkv, s.N * s.Channels()},
		{"alpha", alpha, s.N * s.VHeads}, {"beta", beta, s.N * s.VHeads}, {"state", state, s.StateLen()},
	} {
		if c.b.Len() < c.want {
			return fmt.Errorf("%s buffer holds %d values, want %d", c.what, c.b.Len(), c.want)
		}
	}
	return nil
}
