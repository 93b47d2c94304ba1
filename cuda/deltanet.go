package cuda

import "fmt"

// The Gated DeltaNet launchers (kernels/deltanet.cu): what the hybrids (qwen35moe, qwen3next)
// run beyond a plain MoE transformer.

// deltaNetKernelNames lists deltanet.cu's kernels for kernelNames.
func deltaNetKernelNames() []string {
	return []string{"conv1d_causal", "silu_f32", "mul_sigmoid", "sigmoid_routes", "l2_norm_qk", "gated_delta_rule", "gated_delta_chunked", "gated_rms_norm"}
}

// ConvMaxTaps is the most taps Conv1DCausal takes (CONV_MAX_K in deltanet.cu).
const ConvMaxTaps = 8

// Conv1DCausal runs a depthwise causal convolution over n tokens of x [n][channels] into y
// (which may be x): y[t][c] = sum_j w[c][j] * in[t-taps+1+j][c], the inputs before x being
// the taps-1 rows of state [taps-1][channels], which is left holding the last taps-1 inputs.
// w [channels][taps] is f32, or f16 when wF16.
func (k *Kernels) Conv1DCausal(s *Stream, x, y, state, w DevicePtr, wF16 bool, n, channels, taps int) error {
	if n <= 0 || channels <= 0 || taps < 2 || taps > ConvMaxTaps {
		return fmt.Errorf("cuda: conv1d_causal: bad shape tokens=%d channels=%d taps=%d (2 to %d taps)", n, channels, taps, ConvMaxTaps)
	}
	f16 := 0
	if wF16 {
		f16 = 1
	}
	a := new(Args).Ptr(x).Ptr(y).Ptr(state).Ptr(w).Int(f16).Int(n).Int(channels).Int(taps)
	return k.launch("conv1d_causal", s, Dim3{X: ceilDiv(channels, 128)}, Dim3{X: 128}, 0, a)
}

// SiLU replaces x by x*sigmoid(x) over n floats.
func (k *Kernels) SiLU(s *Stream, x DevicePtr, n int) error {
	if n <= 0 {
		return fmt.Errorf("cuda: silu: %d values", n)
	}
	return k.launch("silu_f32", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(x).Int64(int64(n)))
}

// MulSigmoid computes y *= sigmoid(g) over n floats.
func (k *Kernels) MulSigmoid(s *Stream, y, g DevicePtr, n int) error {
	if n <= 0 {
		return fmt.Errorf("cuda: mul_sigmoid: %d values", n)
	}
	return k.launch("mul_sigmoid", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(y).Ptr(g).Int64(int64(n)))
}

// SigmoidRoutes routes each of n tokens to expert 0 with weight sigmoid(logits[t]): ids [n]
// int32 and weights [n] f32 on the device (a shared expert run as a one-expert MoE).
func (k *Kernels) SigmoidRoutes(s *Stream, logits, ids, weights DevicePtr, n int) error {
	if n <= 0 {
		return fmt.Errorf("cuda: sigmoid_routes: %d tokens", n)
	}
	return k.launch("sigmoid_routes", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(logits).Ptr(ids).Ptr(weights).Int(n))
}

// L2NormQK normalises the delta rule's queries and keys: each token's row of qkv (rowStride
// floats apart) starts with kHeads query heads and kHeads key heads of dim values; each head
// becomes x/sqrt(sum x^2 + eps), the query heads times qScale, into y [n][2*kHeads][dim].
func (k *Kernels) L2NormQK(s *Stream, qkv DevicePtr, rowStride int, y DevicePtr, n, kHeads, dim int, qScale, eps float32) error {
	if n <= 0 || n > 65535 || kHeads <= 0 || dim <= 0 || rowStride < 2*kHeads*dim {
		return fmt.Errorf("cuda: l2_norm_qk: bad shape tokens=%d key heads=%d dim=%d row=%d", n, kHeads, dim, rowStride)
	}
	block := min(256, 32*ceilDiv(dim, 32))
	a := new(Args).Ptr(qkv).Int64(int64(rowStride)).Ptr(y).Int(kHeads).Int(dim).Float(qScale).Float(eps)
	return k.launch("l2_norm_qk", s, Dim3{X: 2 * kHeads, Y: n}, Dim3{X: block}, 0, a)
}

// DeltaShape is one GatedDeltaRule call's sizes.
type DeltaShape struct {
	Tokens, KHeads, VHeads, KDim, VDim int
	// Grouped: value head h reads key head h/(VHeads/KHeads); else h%KHeads (tiled).
	Grouped bool
}

// MaxDeltaKDim is the largest key head size GatedDeltaRule takes (its state tile of KDim x 32
// floats sits in shared memory).
const MaxDeltaKDim = 256

// deltaWarps is the warps that split a state column's KDim rows.
func deltaWarps(kd int) int { return min(max(kd/16, 1), 8) }

// GatedDeltaRule runs the gated delta rule over the tokens, sequentially in time and in
// parallel over value heads and state columns. qk [n][2*KHeads][KDim] holds the normalised
// (query scaled) heads from L2NormQK; token t's value head h is at v + (t*vStride + h*VDim)
// floats; alpha, beta [n][VHeads] are the raw projections; dtBias, a [VHeads] f32; state
// [VHeads][KDim][VDim] is read and left after the last token; out is [n][VHeads][VDim]. Per
// token and value head: g = softplus(alpha + dtBias)*a, S <- S*exp(g), S <- S + k (x)
// sigmoid(beta)*(v - S^T k), out = S^T q.
func (k *Kernels) GatedDeltaRule(s *Stream, qk, v DevicePtr, vStride int, alpha, beta, dtBias, a, state, out DevicePtr, d DeltaShape) error {
	args, err := deltaArgs("gated_delta_rule", MaxDeltaKDim, qk, v, vStride, alpha, beta, dtBias, a, state, out, d)
	if err != nil {
		return err
	}
	w := deltaWarps(d.KDim)
	shared := (d.KDim + 2*w) * 32 * 4
	return k.launch("gated_delta_rule", s, Dim3{X: ceilDiv(d.VDim, 32), Y: d.VHeads}, Dim3{X: 32, Y: w}, shared, args)
}

// deltaArgs checks d for the delta-rule kernel name (key heads up to maxKDim) and lays out
// the arguments both delta-rule kernels take.
func deltaArgs(name string, maxKDim int, qk, v DevicePtr, vStride int, alpha, beta, dtBias, a, state, out DevicePtr, d DeltaShape) (*Args, error) {
	if d.Tokens <= 0 || d.KHeads <= 0 || d.VHeads <= 0 || d.VHeads > 65535 || d.VHeads%d.KHeads != 0 ||
		d.KDim <= 0 || d.KDim > maxKDim || d.VDim <= 0 || vStride < d.VHeads*d.VDim {
		return nil, fmt.Errorf("cuda: %s: bad shape %+v (key head size at most %d, value heads a multiple of key heads)", name, d, maxKDim)
	}
	grouped := 0
	if d.Grouped {
		grouped = 1
	}
	return new(Args).Ptr(qk).Ptr(v).Int64(int64(vStride)).Ptr(alpha).Ptr(beta).Ptr(dtBias).Ptr(a).Ptr(state).Ptr(out).
		Int(d.Tokens).Int(d.KHeads).Int(d.VHeads).Int(d.KDim).Int(d.VDim).Int(grouped), nil
}

// DeltaChunk is the tokens per block of GatedDeltaRuleChunked (DELTA_CHUNK in deltanet.cu).
const DeltaChunk = 32

// MaxDeltaChunkedKDim is the largest key head size GatedDeltaRuleChunked takes: its shared
// memory (DeltaChunkedShared) must fit the 64 KiB a block may have on the oldest GPUs the
// kernels are built for (sm_75).
const MaxDeltaChunkedKDim = 128

// DeltaChunkedShared is the shared memory GatedDeltaRuleChunked's block takes for key heads
// of kd values: the state's column tile, a chunk's keys and queries (rows padded by one), its
// two DeltaChunk² matrices, its 32 columns of values and three vectors.
func DeltaChunkedShared(kd int) int {
	return 4 * (kd*32 + 2*DeltaChunk*(kd+1) + 2*DeltaChunk*DeltaChunk + DeltaChunk*32 + 3*DeltaChunk)
}

// GatedDeltaRuleChunked computes what GatedDeltaRule does, arguments and layouts alike, a
// chunk of DeltaChunk tokens at a time (the WY form): for a prompt, where the sequential
// kernel's per-token steps dominate. KDim at most MaxDeltaChunkedKDim.
func (k *Kernels) GatedDeltaRuleChunked(s *Stream, qk, v DevicePtr, vStride int, alpha, beta, dtBias, a, state, out DevicePtr, d DeltaShape) error {
	args, err := deltaArgs("gated_delta_chunked", MaxDeltaChunkedKDim, qk, v, vStride, alpha, beta, dtBias, a, state, out, d)
	if err != nil {
		return err
	}
	f, ok := k.fns["gated_delta_chunked"]
	if !ok {
		return fmt.Errorf("cuda: no kernel %q", "gated_delta_chunked")
	}
	shared := DeltaChunkedShared(d.KDim)
	if shared > 48<<10 {
		if err := f.SetMaxDynamicShared(shared); err != nil {
			return err
		}
	}
	return f.Launch(s, Dim3{X: ceilDiv(d.VDim, 32), Y: d.VHeads}, Dim3{X: 256}, shared, args)
}

// GatedRMSNorm writes to y (which may be x) each of rows rows of dim values of x as
// x/sqrt(mean(x^2)+eps) * w * silu(z), z laid out as x and w [dim] f32.
func (k *Kernels) GatedRMSNorm(s *Stream, x, z, w, y DevicePtr, rows, dim int, eps float32) error {
	if rows <= 0 || dim <= 0 || w == 0 {
		return fmt.Errorf("cuda: gated_rms_norm: bad shape rows=%d dim=%d", rows, dim)
	}
	block := min(256, 32*ceilDiv(dim, 32))
	a := new(Args).Ptr(x).Ptr(z).Ptr(w).Ptr(y).Int(dim).Float(eps)
	return k.launch("gated_rms_norm", s, Dim3{X: rows}, Dim3{X: block}, 0, a)
}
