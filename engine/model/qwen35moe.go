package model

// qwen35moe (Qwen3.5-MoE) and qwen3next (Qwen3-Next): hybrids of Gated DeltaNet layers and
// gated full-attention layers (one in full_attention_interval), every MoE with a shared
// expert behind a sigmoid gate. The forward pass is Model.Forward's; what is particular to
// them is read here: their hyper-parameters and the Gated DeltaNet tensors. How qwen3next's
// files differ is data (HybridTraits): beta and alpha fused in ssm_ba, value heads in grouped
// order, and in older files q, k, v and z fused in ssm_in.

import (
	"fmt"
	"math"

	"strata/engine/compute"
	"strata/engine/gguf"
)

// maxStateFloatsPerLayer bounds one Gated DeltaNet layer's recurrent state (4 GiB of float32;
// qwen3next-80b-a3b's is about 550k floats).
const maxStateFloatsPerLayer = 1 << 30

// readHybrid reads the Gated DeltaNet shapes, the layer pattern, the partial RoPE and the
// shared expert of a hybrid, and checks that the head splits divide.
func readHybrid(f *gguf.File, h *Hparams) error {
	var err error
	get := func(suffix string) int {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = f.ArchUint(suffix)
		if err == nil && (v == 0 || v > 1<<24) {
			err = fmt.Errorf("model: %s: %s.%s = %d is out of range", f.Path, h.Arch, suffix, v)
		}
		if err != nil {
			err = fmt.Errorf("model: %s: %s needs key %s.%s: %w", f.Path, h.Arch, h.Arch, suffix, err)
		}
		return int(v)
	}
	h.SSM.ConvKernel = get("ssm.conv_kernel")
	h.SSM.KDim = get("ssm.state_size")
	h.SSM.KHeads = get("ssm.group_count")
	h.SSM.VHeads = get("ssm.time_step_rank")
	inner := get("ssm.inner_size")
	h.SharedFFN = get("expert_shared_feed_forward_length")
	if err != nil {
		return err
	}
	switch {
	case h.SSM.VHeads%h.SSM.KHeads != 0:
		return fmt.Errorf("model: %s: %s.ssm.time_step_rank (%d value heads) is not a multiple of %s.ssm.group_count (%d key heads)", f.Path, h.Arch, h.SSM.VHeads, h.Arch, h.SSM.KHeads)
	case inner%h.SSM.VHeads != 0:
		return fmt.Errorf("model: %s: %s.ssm.inner_size %d does not split into %d value heads", f.Path, h.Arch, inner, h.SSM.VHeads)
	case h.SSM.ConvKernel < 2:
		return fmt.Errorf("model: %s: %s.ssm.conv_kernel %d: a causal conv needs at least 2 taps", f.Path, h.Arch, h.SSM.ConvKernel)
	}
	h.SSM.VDim = inner / h.SSM.VHeads
	// Each key is bounded alone; their product, one layer's state, must be too, or a damaged
	// file's state overflows the sizes the planner adds up.
	s := h.SSM
	if floats := float64(s.ConvKernel-1)*(2*float64(s.KHeads)*float64(s.KDim)+float64(inner)) + float64(inner)*float64(s.KDim); floats > maxStateFloatsPerLayer {
		return fmt.Errorf("model: %s: %s.ssm.conv_kernel %d, ssm.state_size %d, ssm.group_count %d and ssm.inner_size %d give a Gated DeltaNet state of %.3g floats a layer, more than %d",
			f.Path, h.Arch, s.ConvKernel, s.KDim, s.KHeads, inner, floats, maxStateFloatsPerLayer)
	}
	// Multi-token-prediction layers (nextn_predict_layers) follow the trunk in block_count;
	// Strata does not draft with them, so the model is the layers before them.
	nextn, kerr := f.ArchUintOr("nextn_predict_layers", 0)
	if kerr != nil || nextn >= uint64(h.Layers) {
		return fmt.Errorf("model: %s: %s.nextn_predict_layers = %d leaves no layers of %d (%v)", f.Path, h.Arch, nextn, h.Layers, kerr)
	}
	h.Layers -= int(nextn)
	// Which layers are Gated DeltaNet: attention.recurrent_layers when the file lists them,
	// else all but every full_attention_interval-th (llama.cpp reads them the same way); an
	// interval beyond the layer count leaves Gated DeltaNet layers only, and no KV cache.
	h.Recurrent = make([]bool, h.Layers)
	if v, ok := f.Lookup(h.Arch + ".attention.recurrent_layers"); ok {
		list, isBools := v.Bools()
		if !isBools || len(list) < h.Layers {
			return fmt.Errorf("model: %s: %s.attention.recurrent_layers is not a list of %d bools", f.Path, h.Arch, h.Layers)
		}
		copy(h.Recurrent, list)
		return readRope(f, h)
	}
	every, kerr := f.ArchUintOr("full_attention_interval", 4)
	if kerr != nil || every == 0 {
		return fmt.Errorf("model: %s: %s.full_attention_interval = %d is not a layer interval (%v)", f.Path, h.Arch, every, kerr)
	}
	for l := range h.Recurrent {
		h.Recurrent[l] = (l+1)%int(every) != 0
	}
	return readRope(f, h)
}

// readRope reads how many dims of each attention head RoPE rotates.
func readRope(f *gguf.File, h *Hparams) error {
	rd, kerr := f.ArchUintOr("rope.dimension_count", uint64(h.HeadDim))
	if kerr != nil || rd == 0 || rd%2 != 0 || rd > uint64(h.HeadDim) {
		return fmt.Errorf("model: %s: %s.rope.dimension_count = %d must be even and at most the head dim %d (%v)", f.Path, h.Arch, rd, h.HeadDim, kerr)
	}
	h.RopeDims = int(rd)
	return nil
}

// deltaNet is one Gated DeltaNet layer's weights.
type deltaNet struct {
	qkv, z, beta, alpha compute.Weight // input projections
	conv                compute.Weight // [channels x kernel]
	dtBias, a           compute.Weight // per value head; a = -exp(A_log)
	norm, out           compute.Weight
	state               int // the layer's index in the recurrent state
}

// loadDeltaNet places layer l's Gated DeltaNet weights.
func loadDeltaNet(ld *loader, h Hparams, l, state int) (*deltaNet, error) {
	d := &deltaNet{state: state}
	s := h.SSM
	keyDim, valDim := s.KHeads*s.KDim, s.VHeads*s.VDim
	channels := 2*keyDim + valDim
	name := func(t string) string { return fmt.Sprintf("blk.%d.%s", l, t) }
	var err error
	p := func(dst *compute.Weight, tensor string, rows, cols int) {
		if err == nil {
			*dst, err = ld.place(name(tensor), rows, cols, 1)
		}
	}
	if _, fused := ld.f.Tensor(name("ssm_in.weight")); fused && !has(ld.f, name("attn_qkv.weight")) {
		err = loadFusedQKVZ(ld, h, d, name("ssm_in.weight"))
	} else {
		p(&d.qkv, "attn_qkv.weight", channels, h.Hidden)
		p(&d.z, "attn_gate.weight", valDim, h.Hidden)
	}
	if h.Hybrid.FusedBA {
		if err == nil {
			err = loadFusedBA(ld, h, d, name("ssm_ba.weight"))
		}
	} else {
		p(&d.beta, "ssm_beta.weight", s.VHeads, h.Hidden)
		p(&d.alpha, "ssm_alpha.weight", s.VHeads, h.Hidden)
	}
	p(&d.conv, "ssm_conv1d.weight", channels, s.ConvKernel)
	p(&d.dtBias, "ssm_dt.bias", 1, s.VHeads)
	p(&d.a, "ssm_a", 1, s.VHeads)
	p(&d.norm, "ssm_norm.weight", 1, s.VDim)
	p(&d.out, "ssm_out.weight", h.Hidden, valDim)
	return d, err
}

func has(f *gguf.File, name string) bool { _, ok := f.Tensor(name); return ok }

// loadFusedBA splits qwen3next's ssm_ba, per key head [beta x r | alpha x r], into beta and
// alpha weights of VHeads rows each, value heads in the file's (grouped) order.
func loadFusedBA(ld *loader, h Hparams, d *deltaNet, tensor string) error {
	s := h.SSM
	r := s.VHeads / s.KHeads
	spec, err := ld.spec(tensor, 2*s.VHeads, h.Hidden, 1)
	if err != nil {
		return err
	}
	parts, err := splitRows(spec, s.KHeads, []int{r, r})
	if err != nil {
		return fmt.Errorf("model: %s: %w", ld.f.Path, err)
	}
	if d.beta, err = ld.placeSpec(parts[0]); err != nil {
		return err
	}
	if d.alpha, err = ld.placeSpec(parts[1]); err != nil {
		return err
	}
	ld.placed(len(spec.Data))
	return nil
}

// loadFusedQKVZ splits the ssm_in of older qwen3next files, per key head [q | k | v x r |
// z x r], into the qkv weight the conv reads (all q, all k, all v) and z.
func loadFusedQKVZ(ld *loader, h Hparams, d *deltaNet, tensor string) error {
	s := h.SSM
	r := s.VHeads / s.KHeads
	spec, err := ld.spec(tensor, 2*s.KHeads*s.KDim+2*s.VHeads*s.VDim, h.Hidden, 1)
	if err != nil {
		return err
	}
	parts, err := splitRows(spec, s.KHeads, []int{s.KDim, s.KDim, r * s.VDim, r * s.VDim})
	if err != nil {
		return fmt.Errorf("model: %s: %w", ld.f.Path, err)
	}
	qkv := parts[0]
	qkv.Name = tensor + "[qkv]"
	qkv.Data = append(append(append([]byte(nil), parts[0].Data...), parts[1].Data...), parts[2].Data...)
	qkv.Rows = parts[0].Rows + parts[1].Rows + parts[2].Rows
	if d.qkv, err = ld.placeSpec(qkv); err != nil {
		return err
	}
	if d.z, err = ld.placeSpec(parts[3]); err != nil {
		return err
	}
	ld.placed(len(spec.Data))
	return nil
}

// deltaScratch is the Gated DeltaNet's working space for n tokens.
type deltaScratch struct {
	qkv, conv, z, beta, alpha, out compute.Buf
}

func (m *Model) newDeltaScratch(n int) deltaScratch {
	s, b := m.H.SSM, m.b
	channels := 2*s.KHeads*s.KDim + s.VHeads*s.VDim
	return deltaScratch{
		qkv: b.NewBuf(n * channels), conv: b.NewBuf(n * channels), z: b.NewBuf(n * s.VHeads * s.VDim),
		beta: b.NewBuf(n * s.VHeads), alpha: b.NewBuf(n * s.VHeads), out: b.NewBuf(n * s.VHeads * s.VDim),
	}
}

// deltaNet is the Gated DeltaNet block on the normed input xn, into proj: the projections,
// the causal conv (its state carries the last inputs) and SiLU, the gated delta rule (its
// state carries S), the gated RMSNorm by silu(z), the output projection.
func (m *Model) deltaNet(d *deltaNet, st layerState, sb *scratch, n int) {
	h, b, hy, sc := m.H, m.b, m.hy, &sb.delta
	s := h.SSM
	spec := compute.DeltaSpec{N: n, KHeads: s.KHeads, VHeads: s.VHeads, KDim: s.KDim, VDim: s.VDim,
		Scale: float32(1 / math.Sqrt(float64(s.KDim))), DtBias: d.dtBias, A: d.a, GroupedVHeads: h.Hybrid.GroupedVHeads}
	b.MatMuls([]compute.Buf{sc.qkv, sc.z, sc.beta, sc.alpha}, []compute.Weight{d.qkv, d.z, d.beta, d.alpha}, sb.xn, n)
	hy.CausalConv1D(sc.conv, sc.qkv, st.conv, d.conv, n)
	hy.SiLU(sc.conv, n*spec.Channels())
	hy.GatedDeltaNet(sc.out, sc.conv, sc.alpha, sc.beta, st.ssm, spec)
	hy.GatedRMSNorm(sc.out, sc.out, sc.z, d.norm, n*s.VHeads, h.Eps)
	b.MatMul(sb.proj, d.out, sc.out, n)
}
