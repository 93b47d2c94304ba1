package model

import (
	"fmt"
	"math"

	"strata/engine/compute"
	"strata/engine/gguf"
)

// gpt-oss (OpenAI's open-weight MoE; GGUF arch "gpt-oss"), per layer:
//   - attention: attn_norm, q/k/v projections with biases, no q/k norm, NeoX RoPE with YaRN
//     frequencies and attention factor, GQA with one learned sink logit per query head in
//     the softmax; even layers see only the last SlidingWindow positions, odd layers all;
//     attn_output with bias; residual.
//   - MoE: post_attention_norm, router logits with bias, the top k logits then a softmax over
//     those k; each expert g = gate·x + b, u = up·x + b, the clamped SwiGLU (gptOssLimit,
//     gptOssAlpha, +1 on u), down·a + b; weighted sum; residual.

// The clamped SwiGLU's constants: fixed by the architecture, not stored in the file.
const (
	gptOssLimit = 7
	gptOssAlpha = 1.702
)

// readGptOssHparams reads what gpt-oss adds to the shared keys: YaRN and the sliding window.
func readGptOssHparams(f *gguf.File, h *Hparams) error {
	key := func(suffix string) string { return h.Arch + "." + suffix }
	if err := readYarn(f, h); err != nil {
		return err
	}
	if !(h.RopeBase > 1) || math.IsInf(float64(h.RopeBase), 0) {
		return fmt.Errorf("model: %s: %s = %v, want more than 1", f.Path, key("rope.freq_base"), h.RopeBase)
	}
	w, err := f.ArchUintOr("attention.sliding_window", 0)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if w > 1<<24 {
		return fmt.Errorf("model: %s: %s = %d is out of range", f.Path, key("attention.sliding_window"), w)
	}
	// No key says which layers slide: gpt-oss alternates, starting with a sliding one.
	h.SlidingWindow, h.SlidingEvery = int(w), 2
	h.RouteTopKFirst = true
	return nil
}

// tableRope is the rotation of a model that needs a frequency table: YaRN's, or (gpt-oss
// without scaling) plain NeoX frequencies.
func tableRope(h Hparams) *compute.Rope {
	if h.Yarn != nil {
		return yarnRope(float64(h.RopeBase), h.HeadDim, *h.Yarn)
	}
	r := &compute.Rope{InvFreq: make([]float32, h.HeadDim/2), Scale: 1}
	for i := range r.InvFreq {
		r.InvFreq[i] = float32(1 / math.Pow(float64(h.RopeBase), float64(2*i)/float64(h.HeadDim)))
	}
	return r
}

// yarnRope is YaRN's rotation: NeoX pairs over the whole head with the YaRN frequencies
// for pair i < d/2 of f_i = base^(-2i/d): f_i/factor·r_i + f_i·(1 - r_i), with the ramp r_i
// = clamp((i - low)/(high - low), 0, 1) between the correction dimensions of beta_fast and
// beta_slow, rounded outwards when y.Truncate (transformers' default, Qwen3's) and not for
// gpt-oss (its truncate=false); cos and sin scaled by 0.1·ln(factor) + 1.
func yarnRope(base float64, d int, y Yarn) *compute.Rope {
	corr := func(beta float64) float64 {
		return float64(d) * math.Log(float64(y.OrigContext)/(beta*2*math.Pi)) / (2 * math.Log(base))
	}
	lo, hi := corr(y.BetaFast), corr(y.BetaSlow)
	if y.Truncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	low, high := max(lo, 0), min(hi, float64(d-1))
	if low == high {
		high += 0.001 // as transformers does, so the ramp is defined
	}
	half := d / 2
	r := &compute.Rope{InvFreq: make([]float32, half), Scale: 1}
	if y.Factor > 1 {
		r.Scale = float32(0.1*math.Log(y.Factor) + 1)
	}
	for i := range half {
		// float32 as transformers computes them.
		f := float32(math.Pow(base, float64(float32(2*i)/float32(d))))
		extrap, interp := 1/f, 1/(float32(y.Factor)*f)
		ramp := float32(min(max((float64(i)-low)/(high-low), 0), 1))
		r.InvFreq[i] = interp*ramp + extrap*(1-ramp)
	}
	return r
}

// loadGptOssAttention places what gpt-oss's attention adds to q, k, v and o (loaded by
// loadAttention): their biases and the sinks, and sets the layer's window.
func loadGptOssAttention(ld *loader, h Hparams, l int, a *attention) error {
	qDim, kvDim := h.Heads*h.HeadDim, h.KVHeads*h.HeadDim
	var err error
	p := func(dst *compute.Weight, name string, n int) {
		if err == nil {
			*dst, err = ld.place(fmt.Sprintf("blk.%d.%s", l, name), 1, n, 1)
		}
	}
	p(&a.qBias, "attn_q.bias", qDim)
	p(&a.kBias, "attn_k.bias", kvDim)
	p(&a.vBias, "attn_v.bias", kvDim)
	p(&a.oBias, "attn_output.bias", h.Hidden)
	p(&a.sinks, "attn_sinks.weight", h.Heads) // one per query head
	a.window = h.Window(l)
	return err
}

// ExpertFFN is what gpt-oss's experts compute beyond their three products: the stacked bias
// tensors as they sit in the file (Rows 1, one row per expert; gate, up, down) and the
// clamped SwiGLU's constants.
type ExpertFFN struct {
	Bias         [3]compute.WeightSpec
	Limit, Alpha float32
}

// BiasedExperts is what an ExpertPlacer's experts implement to run gpt-oss's (the expert
// tiers keep each stack's biases in its own order).
type BiasedExperts interface {
	UseFFN(ffn ExpertFFN) error
}

// gptOssFFN checks and describes layer l's expert biases (ne [rows, experts]).
func gptOssFFN(ld *loader, h Hparams, l int) (ExpertFFN, error) {
	ffn := ExpertFFN{Limit: gptOssLimit, Alpha: gptOssAlpha}
	for m, b := range []struct {
		name string
		n    int
	}{{"ffn_gate_exps.bias", h.ExpertFFN}, {"ffn_up_exps.bias", h.ExpertFFN}, {"ffn_down_exps.bias", h.Hidden}} {
		s, err := ld.spec(fmt.Sprintf("blk.%d.%s", l, b.name), h.Experts, b.n, 1) // ne [n, experts]
		if err != nil {
			return ffn, err
		}
		s.Rows, s.Experts = 1, h.Experts // one row per expert
		ffn.Bias[m] = s
	}
	return ffn, nil
}

// placeGptOssExperts places layer l's experts with their biases: through place (the expert
// tiers) when it is set, else on the backend.
func placeGptOssExperts(ld *loader, h Hparams, l int, g, u, d compute.WeightSpec, place ExpertPlacer) (compute.Experts, error) {
	ffn, err := gptOssFFN(ld, h, l)
	if err != nil {
		return nil, err
	}
	for _, s := range ffn.Bias {
		ld.placed(len(s.Data))
	}
	if place != nil {
		e, err := place(l, g, u, d)
		if err != nil {
			return nil, err
		}
		be, ok := e.(BiasedExperts)
		if !ok {
			return nil, fmt.Errorf("model: %s: layer %d: the expert placement does not carry gpt-oss's expert biases", ld.f.Path, l)
		}
		return e, be.UseFFN(ffn)
	}
	e := compute.BackendExperts{B: ld.b, FFN: &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}}
	for _, w := range []struct {
		dst  *compute.Weight
		spec compute.WeightSpec
	}{{&e.Gate, g}, {&e.Up, u}, {&e.Down, d}, {&e.FFN.GateBias, ffn.Bias[0]}, {&e.FFN.UpBias, ffn.Bias[1]}, {&e.FFN.DownBias, ffn.Bias[2]}} {
		if *w.dst, err = ld.b.Place(w.spec); err != nil {
			return nil, err
		}
	}
	return e, nil
}
