// Package model holds the architectures Strata runs: hyper-parameters read from GGUF metadata
// and the forward pass, written once against compute.Backend.
package model

import (
	"fmt"

	"strata/engine/gguf"
)

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
}

// Supported lists the architectures this package can run.
func Supported() []string { return []string{"qwen3moe"} }

// ReadHparams reads and checks the hyper-parameters of f.
func ReadHparams(f *gguf.File) (Hparams, error) {
	arch := f.Architecture()
	if arch != "qwen3moe" {
		if arch == "" {
			return Hparams{}, fmt.Errorf("model: %s has no general.architecture key: not a model GGUF", f.Path)
		}
		return Hparams{}, fmt.Errorf("model: %s: architecture %q is not supported yet (Strata runs: %v)", f.Path, arch, Supported())
	}
	h := Hparams{Arch: arch, NormTopK: true}
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
	if vl, _ := f.ArchUintOr("attention.value_length", hd); vl != hd {
		return Hparams{}, fmt.Errorf("model: %s: value_length %d differs from key_length %d, which qwen3moe never does", f.Path, vl, hd)
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
	return h, nil
}
