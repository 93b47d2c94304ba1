// Package model holds the architectures Strata runs: hyper-parameters read from GGUF metadata
// and the forward pass, written once against compute.Backend.
package model

import (
	"errors"
	"fmt"
	"math"

	"strata/engine/gguf"
)

// ErrUnsupportedArch is wrapped by the error for a model whose architecture Strata does not
// run.
var ErrUnsupportedArch = errors.New("not supported")

// Hparams are the shapes and constants of a qwen3moe-style model.
type Hparams struct {
	Arch        string
	Layers      int
	Hidden      int
	Heads       int
	KVHeads     int
	HeadDim     int
	Experts     int
	ExpertsUsed int
	ExpertFFN   int
	Vocab       int
	Context     int
	RopeBase    float32
	Eps         float32
	NormTopK    bool // renormalise the top-k router weights to sum to 1

	// The Gated DeltaNet hybrids (qwen35moe, qwen3next); zero for qwen3moe.
	Hybrid    HybridTraits
	Recurrent []bool // per layer: a Gated DeltaNet layer (else gated full attention)
	RopeDims  int    // the dims of each head RoPE rotates (HeadDim but in hybrids)
	SharedFFN int    // the shared expert's FFN width
	SSM       SSM

	// gpt-oss; zero for the others.
	Yarn          *Yarn // YaRN-scaled RoPE (nil: plain RoPE over RopeBase)
	SlidingWindow int   // keys a sliding-window layer sees (0: none slides)
	SlidingEvery  int   // layer l slides when l % SlidingEvery == 0 (gpt-oss: 2, the even layers)
	// RouteTopKFirst: the router takes the top k logits, then a softmax over those k
	// (gpt-oss); else a softmax over all experts, then the top k.
	RouteTopKFirst bool
}

// Yarn is YaRN's context extension of RoPE.
type Yarn struct {
	Factor             float64
	OrigContext        int
	BetaFast, BetaSlow float64
	Truncate           bool // round the ramp's ends outwards (transformers' default; not gpt-oss)
}

// ContextLimit is the most context the model takes: its trained context_length, or with
// YaRN configured in the file the factor times the original context when that is more
// (Qwen3-30B-A3B: 40,960 trained, 4 x 32,768 = 131,072 with YaRN).
func (h Hparams) ContextLimit() int {
	if h.Yarn != nil {
		return max(h.Context, int(h.Yarn.Factor*float64(h.Yarn.OrigContext)))
	}
	return h.Context
}

// readYarn reads the rope.scaling keys: YaRN's factor, original context and betas. gpt-oss
// runs with "yarn" or "none"; qwen3moe reads "yarn" and ignores what it does not apply.
func readYarn(f *gguf.File, h *Hparams) error {
	key := func(suffix string) string { return h.Arch + "." + suffix }
	typ := "none"
	if v, ok := f.Lookup(key("rope.scaling.type")); ok {
		s, ok := v.Str()
		if !ok {
			return fmt.Errorf("model: %s: metadata key %q is not a string", f.Path, key("rope.scaling.type"))
		}
		typ = s
	}
	switch {
	case typ == "yarn":
	case h.Arch != "gpt-oss" || typ == "none":
		return nil
	default:
		return fmt.Errorf("model: %s: %s = %q: Strata runs gpt-oss with \"yarn\" or \"none\"", f.Path, key("rope.scaling.type"), typ)
	}
	y := &Yarn{Truncate: h.Arch != "gpt-oss"}
	factor, err := f.ArchFloat("rope.scaling.factor")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	orig, err := f.ArchUint("rope.scaling.original_context_length")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	y.Factor, y.OrigContext = factor, int(orig)
	if y.BetaFast, err = f.ArchFloatOr("rope.scaling.yarn_beta_fast", 32); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if y.BetaSlow, err = f.ArchFloatOr("rope.scaling.yarn_beta_slow", 1); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	switch {
	case !(y.Factor >= 1) || math.IsInf(y.Factor, 0) || y.Factor > 1024:
		return fmt.Errorf("model: %s: %s = %v, want a factor of at least 1", f.Path, key("rope.scaling.factor"), y.Factor)
	case y.OrigContext <= 0 || y.OrigContext > 1<<24:
		return fmt.Errorf("model: %s: %s = %d is out of range", f.Path, key("rope.scaling.original_context_length"), y.OrigContext)
	case !(y.BetaFast > 0) || !(y.BetaSlow > 0) || math.IsInf(y.BetaFast, 0) || math.IsInf(y.BetaSlow, 0):
		return fmt.Errorf("model: %s: %s/%s = %v/%v, want positive", f.Path, key("rope.scaling.yarn_beta_fast"), key("rope.scaling.yarn_beta_slow"), y.BetaFast, y.BetaSlow)
	}
	if !(h.RopeBase > 1) || math.IsInf(float64(h.RopeBase), 0) {
		return fmt.Errorf("model: %s: %s = %v, want more than 1", f.Path, key("rope.freq_base"), h.RopeBase)
	}
	h.Yarn = y
	return nil
}

// Window is the sliding window of layer l, 0 for a full-attention layer.
func (h Hparams) Window(l int) int {
	if h.SlidingWindow > 0 && h.SlidingEvery > 0 && l%h.SlidingEvery == 0 {
		return h.SlidingWindow
	}
	return 0
}

// SSM are the shapes of the Gated DeltaNet layers.
type SSM struct {
	ConvKernel     int // taps of the causal conv
	KHeads, VHeads int // key (ssm.group_count) and value (ssm.time_step_rank) heads
	KDim, VDim     int // per head (ssm.state_size; ssm.inner_size / VHeads)
}

// HybridTraits are what sets the hybrid architectures apart, as data: qwen3next's files differ
// from qwen35moe's only in these.
type HybridTraits struct {
	On bool // Gated DeltaNet layers, gated attention, partial RoPE, zero-centred norms stored as 1+w, a gated shared expert
	// FusedBA: beta and alpha are one tensor ssm_ba, per key head [beta x r | alpha x r]
	// with r = VHeads/KHeads (qwen3next); else ssm_beta and ssm_alpha.
	FusedBA bool
	// GroupedVHeads: value head h belongs to key head h / r (qwen3next); qwen35moe's
	// converter tiles them, so h belongs to key head h % KHeads.
	GroupedVHeads bool
}

// archTraits says whether this package runs arch and how the hybrids differ.
func archTraits(arch string) (HybridTraits, bool) {
	switch arch {
	case "qwen3moe":
		return HybridTraits{}, true
	case "qwen35moe":
		return HybridTraits{On: true}, true
	case "qwen3next":
		return HybridTraits{On: true, FusedBA: true, GroupedVHeads: true}, true
	case "gpt-oss":
		return HybridTraits{}, true
	}
	return HybridTraits{}, false
}

// Supported lists the architectures this package can run.
func Supported() []string { return []string{"gpt-oss", "qwen35moe", "qwen3moe", "qwen3next"} }

// ReadHparams reads and checks the hyper-parameters of f.
func ReadHparams(f *gguf.File) (Hparams, error) {
	arch := f.Architecture()
	traits, ok := archTraits(arch)
	if !ok {
		if arch == "" {
			return Hparams{}, fmt.Errorf("model: %s has no general.architecture key: not a model GGUF", f.Path)
		}
		return Hparams{}, fmt.Errorf("model: %s: architecture %q: %w yet (Strata runs: %v)", f.Path, arch, ErrUnsupportedArch, Supported())
	}
	h := Hparams{Arch: arch, NormTopK: arch != "gpt-oss", Hybrid: traits}
	var err error
	get := func(suffix string) int {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = f.ArchUint(suffix)
		if err == nil && (v == 0 || v > 1<<24) {
			err = fmt.Errorf("model: %s: %s.%s = %d is out of range", f.Path, arch, suffix, v)
		}
		return int(v)
	}
	h.Layers = get("block_count")
	h.Hidden = get("embedding_length")
	h.Heads = get("attention.head_count")
	h.KVHeads = get("attention.head_count_kv")
	h.Experts = get("expert_count")
	h.ExpertsUsed = get("expert_used_count")
	h.ExpertFFN = get("expert_feed_forward_length")
	if err != nil {
		return Hparams{}, err
	}
	hd, _ := f.ArchUintOr("attention.key_length", uint64(h.Hidden/h.Heads))
	h.HeadDim = int(hd)
	ctx, _ := f.ArchUintOr("context_length", 4096)
	h.Context = int(ctx)
	base, _ := f.ArchFloatOr("rope.freq_base", 10000)
	h.RopeBase = float32(base)
	eps, _ := f.ArchFloatOr("attention.layer_norm_rms_epsilon", 1e-6)
	h.Eps = float32(eps)
	h.RopeDims = h.HeadDim
	if vl, _ := f.ArchUintOr("attention.value_length", hd); vl != hd {
		return Hparams{}, fmt.Errorf("model: %s: value_length %d differs from key_length %d, which %s never does", f.Path, vl, hd, arch)
	}
	switch {
	case h.Heads%h.KVHeads != 0:
		return Hparams{}, fmt.Errorf("model: %s: %d attention heads are not a multiple of %d kv heads", f.Path, h.Heads, h.KVHeads)
	case h.ExpertsUsed > h.Experts:
		return Hparams{}, fmt.Errorf("model: %s: %d experts used per token but only %d exist", f.Path, h.ExpertsUsed, h.Experts)
	case h.HeadDim <= 0 || h.HeadDim%2 != 0:
		return Hparams{}, fmt.Errorf("model: %s: head dimension %d must be even and positive", f.Path, h.HeadDim)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return Hparams{}, fmt.Errorf("model: %s: tensor %q is missing", f.Path, "token_embd.weight")
	}
	if len(emb.Ne) != 2 {
		return Hparams{}, fmt.Errorf("model: %s: tensor %q has %d dims, want 2", f.Path, emb.Name, len(emb.Ne))
	}
	h.Vocab = int(emb.Ne[1])
	if traits.On {
		if err := readHybrid(f, &h); err != nil {
			return Hparams{}, err
		}
	}
	switch arch {
	case "gpt-oss":
		if err := readGptOssHparams(f, &h); err != nil {
			return Hparams{}, err
		}
	case "qwen3moe":
		if err := readYarn(f, &h); err != nil {
			return Hparams{}, err
		}
	}
	return h, nil
}
