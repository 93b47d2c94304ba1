// Package synth writes synthetic Mixture-of-Experts GGUF models: real shapes, tensor names
// and metadata, random weights drawn at realistic scales and then quantised. They are for
// shapes and speed (loading, tiering, cache benchmarks), not for correctness.
package synth

import (
	"fmt"
	"strconv"
	"strings"

	"strata/engine/quant"
)

// Spec is everything that decides a synthetic model's bytes.
type Spec struct {
	Arch string // "qwen3moe", "gpt-oss", or the hybrids "qwen35moe" and "qwen3next"
	Name string // general.name

	Layers      int
	Experts     int
	ExpertsUsed int
	Hidden      int
	ExpertFFN   int // expert_feed_forward_length
	FFN         int // feed_forward_length (metadata only: qwen3moe has no dense FFN)
	Heads       int
	KVHeads     int
	HeadDim     int
	Vocab       int
	Context     int
	RopeBase    float64
	RMSEps      float64

	// The hybrids' Gated DeltaNet layers (all but every AttnEvery-th), partial RoPE and
	// shared expert.
	Hybrid HybridSpec

	Quant quant.Type // experts, and attention, token_embd and output unless DenseQuant; norms, biases and router stay F32
	// DenseQuant (0: Quant) is the type of attention, token_embd and output: the published
	// gpt-oss files keep them Q8_0 beside MXFP4 experts.
	DenseQuant quant.Type

	// YaRN (factor, original context; gpt-oss always, qwen3moe when YarnFactor > 0) and
	// gpt-oss's sliding window of its even layers.
	YarnFactor      float64
	YarnOrigContext int
	SlidingWindow   int
	Seed            uint64
	// Zipf skews the routers so expert popularity in each layer follows roughly a Zipf law
	// with this exponent (0: no skew).
	Zipf float64
	// HotQuarter, when > 0 (and Zipf 0), balances each layer's router on Reference so that
	// the hottest quarter of its experts takes about this share of the routes the reference
	// text makes (see balance.go). Reference is that text, each string one user turn:
	// strata synth passes the prompts strata profile runs.
	HotQuarter float64
	Reference  []string
	// Pool, when > 0, builds each quantised tensor from a pool of this many distinct
	// blocks per weight scale (each drawn and quantised honestly) picked at random, instead
	// of quantising every block: quantising 30 billion values one by one takes far too
	// long for a benchmark model. 0 quantises every block.
	Pool int
}

// HybridSpec holds the shapes only qwen35moe and qwen3next have.
type HybridSpec struct {
	SharedFFN      int // the shared expert's FFN
	ConvKernel     int
	KHeads, VHeads int // linear-attention key and value heads
	KDim, VDim     int // their head dims
	AttnEvery      int // full_attention_interval
	RopeDims       int // rotated dims per attention head
}

// IsHybrid reports whether arch is one of the Gated DeltaNet hybrids.
func IsHybrid(arch string) bool { return arch == "qwen35moe" || arch == "qwen3next" }

// PresetFor returns preset name for arch: qwen3moe's presets, gpt-oss's (see gptOssPreset),
// the published hybrid shapes
// "qwen35-35b-a3b" (qwen35moe) and "qwen3next-80b-a3b" (qwen3next), or "tiny" of any arch.
func PresetFor(arch, name string) (Spec, error) {
	if arch == "gpt-oss" {
		return gptOssPreset(name)
	}
	if arch != "qwen3moe" && !IsHybrid(arch) {
		return Spec{}, fmt.Errorf("synth: unknown architecture %q (qwen3moe, gpt-oss, qwen35moe, qwen3next)", arch)
	}
	if !IsHybrid(arch) {
		s, err := Preset(name)
		if err == nil && s.Arch != arch {
			return Spec{}, fmt.Errorf("synth: preset %q is a %s, not a %s", name, s.Arch, arch)
		}
		return s, err
	}
	s := Spec{Arch: arch, RopeBase: 1e7, RMSEps: 1e-6, Quant: quant.Q4_K, Seed: 1}
	switch name {
	case "tiny":
		s.Layers, s.Experts, s.ExpertsUsed = 4, 16, 4
		s.Hidden, s.ExpertFFN = 256, 256
		s.Heads, s.KVHeads, s.HeadDim = 4, 2, 64
		s.Vocab, s.Context = 512, 4096
		s.Hybrid = HybridSpec{SharedFFN: 256, ConvKernel: 4, KHeads: 2, VHeads: 4, KDim: 64, VDim: 64, AttnEvery: 4, RopeDims: 16}
	case "qwen35-35b-a3b", "qwen3next-80b-a3b":
		want := "qwen35moe"
		s.Layers, s.Experts, s.ExpertsUsed, s.Vocab = 40, 256, 8, 248320
		if name == "qwen3next-80b-a3b" {
			want = "qwen3next"
			s.Layers, s.Experts, s.ExpertsUsed, s.Vocab = 48, 512, 10, 151936
		}
		if arch != want {
			return Spec{}, fmt.Errorf("synth: preset %q is a %s, not a %s", name, want, arch)
		}
		s.Hidden, s.ExpertFFN = 2048, 512
		s.Heads, s.KVHeads, s.HeadDim = 16, 2, 256
		s.Context = 262144
		s.Hybrid = HybridSpec{SharedFFN: 512, ConvKernel: 4, KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, AttnEvery: 4, RopeDims: 64}
		s.Pool = 1 << 14
	default:
		return Spec{}, fmt.Errorf("synth: unknown %s preset %q (tiny, qwen35-35b-a3b for qwen35moe, qwen3next-80b-a3b for qwen3next)", arch, name)
	}
	s.FFN = s.ExpertFFN
	s.Name = "strata-synth-" + s.Arch + "-" + name
	return s, nil
}

// Preset returns a named spec with seed 1: "tiny", "30b-a3b" or "235b-a22b" (qwen3moe in
// Q4_K), or "gptoss-small", "gptoss-20b" or "gptoss-120b" (gpt-oss with MXFP4 experts and
// Q8_0 attention, the published shapes but for the small one).
func Preset(name string) (Spec, error) {
	if strings.HasPrefix(name, "gptoss-") {
		return gptOssPreset(name)
	}
	s := Spec{Arch: "qwen3moe", RopeBase: 1e6, RMSEps: 1e-6, Quant: quant.Q4_K, Seed: 1}
	switch name {
	case "tiny":
		s.Layers, s.Experts, s.ExpertsUsed = 2, 8, 2
		s.Hidden, s.ExpertFFN, s.FFN = 256, 256, 512
		s.Heads, s.KVHeads, s.HeadDim = 4, 2, 64
		s.Vocab, s.Context = 512, 4096
	case "30b-a3b":
		s.Layers, s.Experts, s.ExpertsUsed = 48, 128, 8
		s.Hidden, s.ExpertFFN, s.FFN = 2048, 768, 6144
		s.Heads, s.KVHeads, s.HeadDim = 32, 4, 128
		s.Vocab, s.Context = 151936, 40960
		s.Pool = 1 << 14
	case "235b-a22b":
		s.Layers, s.Experts, s.ExpertsUsed = 94, 128, 8
		s.Hidden, s.ExpertFFN, s.FFN = 4096, 1536, 12288
		s.Heads, s.KVHeads, s.HeadDim = 64, 4, 128
		s.Vocab, s.Context = 151936, 40960
		s.Pool = 1 << 14
	default:
		return Spec{}, fmt.Errorf("synth: unknown preset %q (%s)", name, strings.Join(Presets(), ", "))
	}
	s.Name = "strata-synth-" + s.Arch + "-" + name
	return s, nil
}

// Presets lists the preset names.
func Presets() []string {
	return []string{"tiny", "30b-a3b", "235b-a22b", "gptoss-small", "gptoss-20b", "gptoss-120b"}
}

// gptOssPreset is a gpt-oss spec: OpenAI's published shapes (hidden 2880, 64 query and 8 KV
// heads of 64, expert FFN 2880, top 4, YaRN factor 32 over 4096, window 128, o200k's
// vocabulary size) and a small one for tests ("gptoss-small", also gpt-oss's "tiny").
func gptOssPreset(name string) (Spec, error) {
	s := Spec{Arch: "gpt-oss", RopeBase: 150000, RMSEps: 1e-5, Quant: quant.MXFP4, DenseQuant: quant.Q8_0, Seed: 1,
		YarnFactor: 32, YarnOrigContext: 4096, SlidingWindow: 128}
	s.Hidden, s.ExpertFFN, s.FFN = 2880, 2880, 2880
	s.Heads, s.KVHeads, s.HeadDim, s.ExpertsUsed = 64, 8, 64, 4
	s.Vocab, s.Context = 201088, 131072
	switch name {
	case "gptoss-small", "tiny":
		s.Layers, s.Experts = 4, 8
		s.Hidden, s.ExpertFFN, s.FFN = 256, 256, 256
		s.Heads, s.KVHeads, s.HeadDim, s.ExpertsUsed = 8, 2, 32, 2
		s.Vocab, s.SlidingWindow = 512, 8
	case "gptoss-20b":
		s.Layers, s.Experts = 24, 32
		s.Pool = 1 << 14
	case "gptoss-120b":
		s.Layers, s.Experts = 36, 128
		s.Pool = 1 << 14
	default:
		return Spec{}, fmt.Errorf("synth: unknown preset %q (%s)", name, strings.Join(Presets(), ", "))
	}
	s.Name = "strata-synth-" + name
	return s, nil
}

// skewed says whether the embeddings carry the shared direction the routers' popularity
// rides on: under Zipf and under HotQuarter.
func (s Spec) skewed() bool { return s.Zipf > 0 || s.HotQuarter > 0 }

// denseQuant is the type of the non-expert matrices.
func (s Spec) denseQuant() quant.Type {
	if s.DenseQuant != 0 {
		return s.DenseQuant
	}
	return s.Quant
}

// ApplyShape overrides hyper-parameters from "key=value,key=value". Keys: layers, experts,
// experts_used, hidden, expert_ffn, ffn, heads, kv_heads, head_dim, vocab, context,
// rope_base, rms_eps, and for the hybrids shared_ffn, conv_kernel, ssm_k_heads, ssm_v_heads,
// ssm_k_dim, ssm_v_dim, attn_every, rope_dims.
func (s *Spec) ApplyShape(kvs string) error {
	for _, item := range strings.Split(kvs, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("synth: shape %q: want key=value", item)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "rope_base" || k == "rms_eps" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x > 0) {
				return fmt.Errorf("synth: shape %s=%q: want a positive number", k, v)
			}
			if k == "rope_base" {
				s.RopeBase = x
			} else {
				s.RMSEps = x
			}
			continue
		}
		p := s.intField(k)
		if p == nil {
			return fmt.Errorf("synth: shape: unknown key %q (layers, experts, experts_used, hidden, expert_ffn, ffn, heads, kv_heads, head_dim, vocab, context, rope_base, rms_eps; hybrids: shared_ffn, conv_kernel, ssm_k_heads, ssm_v_heads, ssm_k_dim, ssm_v_dim, attn_every, rope_dims)", k)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("synth: shape %s=%q: want a positive integer", k, v)
		}
		*p = n
	}
	return nil
}

func (s *Spec) intField(key string) *int {
	switch key {
	case "layers":
		return &s.Layers
	case "experts":
		return &s.Experts
	case "experts_used":
		return &s.ExpertsUsed
	case "hidden":
		return &s.Hidden
	case "expert_ffn":
		return &s.ExpertFFN
	case "ffn":
		return &s.FFN
	case "heads":
		return &s.Heads
	case "kv_heads":
		return &s.KVHeads
	case "head_dim":
		return &s.HeadDim
	case "vocab":
		return &s.Vocab
	case "context":
		return &s.Context
	case "shared_ffn":
		return &s.Hybrid.SharedFFN
	case "conv_kernel":
		return &s.Hybrid.ConvKernel
	case "ssm_k_heads":
		return &s.Hybrid.KHeads
	case "ssm_v_heads":
		return &s.Hybrid.VHeads
	case "ssm_k_dim":
		return &s.Hybrid.KDim
	case "ssm_v_dim":
		return &s.Hybrid.VDim
	case "attn_every":
		return &s.Hybrid.AttnEvery
	case "rope_dims":
		return &s.Hybrid.RopeDims
	}
	return nil
}

// Validate checks the spec can be written: a known arch, a quantisable type, positive
// sizes, and rows that are whole blocks of the chosen type.
func (s Spec) Validate() error {
	if s.Arch != "qwen3moe" && s.Arch != "gpt-oss" && !IsHybrid(s.Arch) {
		return fmt.Errorf("synth: unknown architecture %q (qwen3moe, gpt-oss, qwen35moe, qwen3next)", s.Arch)
	}
	if IsHybrid(s.Arch) {
		if err := s.Hybrid.validate(s); err != nil {
			return err
		}
	}
	for _, t := range []quant.Type{s.Quant, s.denseQuant()} {
		if !quant.CanQuantize(t) {
			return fmt.Errorf("synth: cannot quantise to %s (quant.Quantize does not support it)", t)
		}
	}
	if s.Arch == "gpt-oss" && (!(s.YarnFactor >= 1) || s.YarnOrigContext <= 0 || s.SlidingWindow <= 0) {
		return fmt.Errorf("synth: gpt-oss needs a YaRN factor >= 1 (%g), an original context (%d) and a sliding window (%d)", s.YarnFactor, s.YarnOrigContext, s.SlidingWindow)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", s.Layers}, {"experts", s.Experts}, {"experts_used", s.ExpertsUsed}, {"hidden", s.Hidden},
		{"expert_ffn", s.ExpertFFN}, {"ffn", s.FFN}, {"heads", s.Heads}, {"kv_heads", s.KVHeads},
		{"head_dim", s.HeadDim}, {"vocab", s.Vocab}, {"context", s.Context}} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s is %d, want > 0", f.name, f.v)
		}
	}
	switch {
	case s.ExpertsUsed > s.Experts:
		return fmt.Errorf("synth: experts_used %d > experts %d", s.ExpertsUsed, s.Experts)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("synth: heads %d is not a multiple of kv_heads %d", s.Heads, s.KVHeads)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("synth: head_dim %d is odd (RoPE rotates pairs)", s.HeadDim)
	case s.Vocab < minVocab:
		return fmt.Errorf("synth: vocab %d is below %d (256 byte tokens and 3 specials)", s.Vocab, minVocab)
	case s.Pool < 0:
		return fmt.Errorf("synth: pool %d is negative", s.Pool)
	case s.Zipf < 0:
		return fmt.Errorf("synth: zipf %g is negative", s.Zipf)
	case s.HotQuarter != 0 && s.Zipf != 0:
		return fmt.Errorf("synth: zipf %g and hot quarter %g: give one", s.Zipf, s.HotQuarter)
	case s.HotQuarter != 0 && !(s.HotQuarter > 0 && s.HotQuarter < 1):
		return fmt.Errorf("synth: hot quarter %g: want a share between 0 and 1", s.HotQuarter)
	case s.HotQuarter != 0 && (s.Experts < 4 || len(s.Reference) == 0):
		return fmt.Errorf("synth: hot quarter %g needs 4 experts or more (%d) and reference text (%d strings)", s.HotQuarter, s.Experts, len(s.Reference))
	case !(s.RopeBase > 0) || !(s.RMSEps > 0):
		return fmt.Errorf("synth: rope_base %g and rms_eps %g must be positive", s.RopeBase, s.RMSEps)
	}
	for _, t := range []quant.Type{s.Quant, s.denseQuant()} {
		bs := t.BlockSize()
		for _, r := range []struct {
			name string
			n    int
		}{{"hidden", s.Hidden}, {"heads*head_dim", s.Heads * s.HeadDim}, {"expert_ffn", s.ExpertFFN}} {
			if r.n%bs != 0 {
				return fmt.Errorf("synth: %s = %d is not a multiple of %s's %d-value blocks", r.name, r.n, t, bs)
			}
		}
	}
	return nil
}

// fileType is llama.cpp's general.file_type for a model made mostly of t.
func fileType(t quant.Type) (uint32, bool) {
	switch t {
	case quant.F32:
		return 0, true
	case quant.F16:
		return 1, true
	case quant.Q4_0:
		return 2, true
	case quant.Q4_1:
		return 3, true
	case quant.Q8_0:
		return 7, true
	case quant.Q5_0:
		return 8, true
	case quant.Q5_1:
		return 9, true
	case quant.Q2_K:
		return 10, true
	case quant.Q3_K:
		return 11, true // Q3_K_S: every matrix Q3_K
	case quant.Q4_K:
		return 14, true // Q4_K_S: every matrix Q4_K
	case quant.Q5_K:
		return 16, true // Q5_K_S
	case quant.Q6_K:
		return 18, true
	case quant.IQ2_XXS:
		return 19, true
	case quant.IQ2_XS:
		return 20, true
	case quant.IQ3_XXS:
		return 23, true
	case quant.IQ4_NL:
		return 25, true
	case quant.IQ3_S:
		return 26, true
	case quant.IQ2_S:
		return 28, true
	case quant.IQ4_XS:
		return 30, true
	case quant.BF16:
		return 32, true
	case quant.MXFP4:
		return 38, true // MOSTLY_MXFP4_MOE
	}
	return 0, false
}

func (h HybridSpec) validate(s Spec) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"shared_ffn", h.SharedFFN}, {"conv_kernel", h.ConvKernel}, {"ssm_k_heads", h.KHeads}, {"ssm_v_heads", h.VHeads},
		{"ssm_k_dim", h.KDim}, {"ssm_v_dim", h.VDim}, {"attn_every", h.AttnEvery}, {"rope_dims", h.RopeDims}} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s is %d, want > 0", f.name, f.v)
		}
	}
	switch {
	case h.VHeads%h.KHeads != 0:
		return fmt.Errorf("synth: ssm_v_heads %d is not a multiple of ssm_k_heads %d", h.VHeads, h.KHeads)
	case h.RopeDims%2 != 0 || h.RopeDims > s.HeadDim:
		return fmt.Errorf("synth: rope_dims %d must be even and at most head_dim %d", h.RopeDims, s.HeadDim)
	case h.ConvKernel < 2:
		return fmt.Errorf("synth: conv_kernel %d, want at least 2", h.ConvKernel)
	}
	bs := s.Quant.BlockSize()
	for _, r := range []struct {
		name string
		n    int
	}{{"shared_ffn", h.SharedFFN}, {"ssm_v_heads*ssm_v_dim", h.VHeads * h.VDim}} {
		if r.n%bs != 0 {
			return fmt.Errorf("synth: %s = %d is not a multiple of %s's %d-value blocks", r.name, r.n, s.Quant, bs)
		}
	}
	return nil
}

// Parameters is the number of values in the model spec describes.
func Parameters(s Spec) int64 {
	var n int64
	for _, t := range plan(s) {
		n += int64(t.rowLen()) * int64(t.rows())
	}
	return n
}
