package compute

// Hybrid is what the Gated DeltaNet hybrids (qwen35moe, qwen3next) need beyond Backend: the
// linear-attention mixer, the gated full attention and the gated shared expert. It is a
// separate interface so a backend without these kernels refuses such a model at load with a
// clear message instead of failing in the middle of a forward pass.
type Hybrid interface {
	// CausalConv1D runs a depthwise causal convolution over time: x and dst are [n x C]
	// with C = w.Rows() channels, w holds each channel's K = w.Cols() taps (oldest first)
	// and state the K-1 input rows before x (zeros at the start of a sequence). dst row t,
	// channel c is Σ_j w[c,j]·in[t-K+1+j, c]; state is left holding the last K-1 input rows.
	CausalConv1D(dst, x, state Buf, w Weight, n int)
	// SiLU replaces each of the first n values of x by x·sigmoid(x).
	SiLU(x Buf, n int)
	// GatedDeltaNet runs the gated delta rule over n tokens (see DeltaSpec) and leaves the
	// state after the last one. A backend may use the chunked form for a prompt and the
	// recurrent form for decode: they are the same maths.
	GatedDeltaNet(dst, qkv, alpha, beta, state Buf, spec DeltaSpec)
	// GatedRMSNorm: each of rows rows of len(w) values of x becomes rmsnorm(x)·w·silu(z)
	// (z has the same layout as x), written to dst (which may be x).
	GatedRMSNorm(dst, x, z Buf, w Weight, rows int, eps float32)
	// MulSigmoid: dst[i] *= sigmoid(gate[i]) for the first n values.
	MulSigmoid(dst, gate Buf, n int)
	// RoPENeoXPartial is RoPENeoX over the first rotDims values of each head only (pairs i,
	// i+rotDims/2 with frequency base^(-2i/rotDims)); the rest of the head passes through.
	RoPENeoXPartial(x Buf, n, heads, headDim, rotDims int, positions []int, base float32)
	// SigmoidRoutes routes each of n tokens to expert 0 alone with weight sigmoid(logit):
	// a shared expert and its gate run as a one-expert MoE.
	SigmoidRoutes(logits Buf, n int) *Routes
}

// DeltaSpec describes one GatedDeltaNet call over n tokens.
//
// qkv is [n x (2·KHeads·KDim + VHeads·VDim)]: per token the queries (KHeads x KDim), the keys
// (KHeads x KDim) and the values (VHeads x VDim). alpha and beta are [n x VHeads], the raw
// projections: per value head, the decay is g = softplus(alpha + DtBias)·A (A < 0) and the
// write strength sigmoid(beta). q and k are L2-normalised per head (x/sqrt(Σx² + 1e-6)) and q
// is multiplied by Scale. Each value head h keeps a state S [KDim x VDim]; per token:
// S ← S·exp(g), S ← S + k ⊗ (sigmoid(beta)·(v − Sᵀk)), out = Sᵀq. dst is [n x VHeads·VDim]
// and state is [VHeads x KDim x VDim].
type DeltaSpec struct {
	N                          int
	KHeads, VHeads, KDim, VDim int
	Scale                      float32
	DtBias, A                  Weight // one value per value head
	// GroupedVHeads: value head h reads key head h / (VHeads/KHeads) (qwen3next's files);
	// otherwise h % KHeads (the tiled order of qwen35moe's files).
	GroupedVHeads bool
}

// KeyHead is the key head value head h reads.
func (s DeltaSpec) KeyHead(h int) int {
	if s.GroupedVHeads {
		return h / (s.VHeads / s.KHeads)
	}
	return h % s.KHeads
}

// Channels is the width of one token's qkv row.
func (s DeltaSpec) Channels() int { return 2*s.KHeads*s.KDim + s.VHeads*s.VDim }

// StateLen is the number of floats of one layer's delta-rule state.
func (s DeltaSpec) StateLen() int { return s.VHeads * s.KDim * s.VDim }
