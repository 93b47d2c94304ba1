package synth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"strata/engine/gguf"
	"strata/engine/quant"
)

// Weight scales, the recipe of the shared fixtures: linear layers N(0, (0.8/sqrt(fan_in))²),
// the router N(0, (1.6/sqrt(hidden))²), the LM head N(0, (2/sqrt(hidden))²), embeddings
// N(0, 1), RMSNorm weights 1 + 0.1·N(0, 1). The attention output (and gpt-oss's bias on it)
// departs from it, at attnOutGain, so deep synths route as their skew says.
const (
	linearGain = 0.8
	routerGain = 1.6
	headGain   = 2.0
	normSpread = 0.1
)

// Router skew (Zipf). Expert popularity is set with weights alone: the embeddings share a
// common direction u (amplitude dcAmplitude per channel against unit noise), which the
// residual stream carries, so u·h is about sqrt(hidden)·cos, the same sign for every
// token. Router row e gets beta_e·u with beta_e chosen so that its expected logit is
// -zipf·ln(rank_e), and its random part is drawn orthogonal to u and scaled so the
// token-dependent logit keeps the recipe's spread. cos is taken as the embeddings' at every
// depth: with the attention output at attnOutGain the layers add little next to the
// stream, and a 48-layer synth at --hot-quarter 0.4 profiled flat over depth with it (an
// assumed growth of 0.4 of the embeddings' variance a layer, the old estimate, over-skewed
// the deep layers: 46% at layer 0 up to 76% at layer 42).
const dcAmplitude = 1.0

// attnOutGain scales the attention output projection down from the linear recipe. With
// random q and k a head attends almost evenly, so its output is mostly the context's mean
// value: the same for every token of a prompt. At the recipe's gain each layer adds such a
// shared part to the residual stream, deep layers' router inputs become nearly one
// direction, and the few experts that direction favours win everywhere (a 48-layer synth
// with no skew at all routed 74% to the hottest quarter, layer 47 alone 86%).
const attnOutGain = 0.1

// rowsPerUnit is how many rows of a non-expert matrix one worker makes at a time.
const rowsPerUnit = 1024

// tensorKind says how a tensor's values are drawn.
type tensorKind int

const (
	kindLinear tensorKind = iota // N(0, sigma²)
	kindNorm                     // 1 + 0.1·N(0, 1)
	kindRouter                   // router rows with the Zipf skew
	kindEmbed                    // N(0, 1) plus the shared direction when skewed
	kindDecay                    // -(0.1 + |N(0, 1)|): a Gated DeltaNet's A, which must be negative
)

// tensorPlan is one tensor to write.
type tensorPlan struct {
	name     string
	typ      quant.Type
	ne       []int64
	kind     tensorKind
	sigma    float32
	layer    int
	unitRows int // rows per unit of work (one expert for expert tensors)
}

func (t tensorPlan) rowLen() int { return int(t.ne[0]) }
func (t tensorPlan) rows() int {
	n := 1
	for _, d := range t.ne[1:] {
		n *= int(d)
	}
	return n
}

// Bias scales of gpt-oss's tensors: small against the products they are added to.
const (
	biasSigma  = 0.1
	rBiasSigma = 0.5
	sinkSigma  = 1.0
)

// plan lists the tensors of a model, in the order convert_hf_to_gguf.py writes them.
func plan(s Spec) []tensorPlan {
	if s.Arch == "gpt-oss" {
		return planGptOss(s)
	}
	h, e, f := int64(s.Hidden), int64(s.Experts), int64(s.ExpertFFN)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	lin := func(fanIn int64) float32 { return float32(linearGain / math.Sqrt(float64(fanIn))) }
	mat := func(name string, ne []int64, sigma float32, layer int) tensorPlan {
		return tensorPlan{name: name, typ: s.Quant, ne: ne, kind: kindLinear, sigma: sigma, layer: layer, unitRows: rowsPerUnit}
	}
	norm := func(name string, n int64) tensorPlan {
		return tensorPlan{name: name, typ: quant.F32, ne: []int64{n}, kind: kindNorm, unitRows: 1}
	}
	expert := func(name string, ne []int64, sigma float32, layer int) tensorPlan {
		t := mat(name, ne, sigma, layer)
		t.unitRows = int(ne[1])
		return t
	}
	embed := mat("token_embd.weight", []int64{h, int64(s.Vocab)}, 1, -1)
	embed.kind = kindEmbed
	out := []tensorPlan{embed}
	if IsHybrid(s.Arch) {
		return append(append(out, hybridLayers(s, mat, norm, expert)...),
			norm("output_norm.weight", h),
			mat("output.weight", []int64{h, int64(s.Vocab)}, float32(headGain/math.Sqrt(float64(h))), -1),
		)
	}
	for l := range s.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		out = append(out,
			norm(b+"attn_norm.weight", h),
			mat(b+"attn_q.weight", []int64{h, q}, lin(h), l),
			mat(b+"attn_k.weight", []int64{h, kv}, lin(h), l),
			mat(b+"attn_v.weight", []int64{h, kv}, lin(h), l),
			mat(b+"attn_output.weight", []int64{q, h}, attnOutGain*lin(q), l),
			norm(b+"attn_q_norm.weight", int64(s.HeadDim)),
			norm(b+"attn_k_norm.weight", int64(s.HeadDim)),
			norm(b+"ffn_norm.weight", h),
			tensorPlan{name: b + "ffn_gate_inp.weight", typ: quant.F32, ne: []int64{h, e}, kind: kindRouter,
				sigma: float32(routerGain / math.Sqrt(float64(h))), layer: l, unitRows: int(e)},
			expert(b+"ffn_gate_exps.weight", []int64{h, f, e}, lin(h), l),
			expert(b+"ffn_up_exps.weight", []int64{h, f, e}, lin(h), l),
			expert(b+"ffn_down_exps.weight", []int64{f, h, e}, lin(f), l),
		)
	}
	return append(out,
		norm("output_norm.weight", h),
		mat("output.weight", []int64{h, int64(s.Vocab)}, float32(headGain/math.Sqrt(float64(h))), -1),
	)
}

// hybridLayers lists the layers of a qwen35moe or qwen3next model in llama.cpp's names: Gated
// DeltaNet layers with every AttnEvery-th a gated attention layer (attn_q holds the query and
// gate rows of each head), each with a MoE and a gated shared expert.
func hybridLayers(s Spec, mat func(string, []int64, float32, int) tensorPlan, norm func(string, int64) tensorPlan,
	expert func(string, []int64, float32, int) tensorPlan) []tensorPlan {
	hs := s.Hybrid
	h, e, f, sf := int64(s.Hidden), int64(s.Experts), int64(s.ExpertFFN), int64(hs.SharedFFN)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	vd := int64(hs.VHeads * hs.VDim)
	channels := int64(2*hs.KHeads*hs.KDim) + vd
	lin := func(fanIn int64) float32 { return float32(linearGain / math.Sqrt(float64(fanIn))) }
	small := func(name string, ne []int64, kind tensorKind, sigma float32) tensorPlan {
		return tensorPlan{name: name, typ: quant.F32, ne: ne, kind: kind, sigma: sigma, unitRows: 1}
	}
	var out []tensorPlan
	for l := range s.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		out = append(out, norm(b+"attn_norm.weight", h))
		if (l+1)%hs.AttnEvery != 0 {
			out = append(out,
				mat(b+"attn_qkv.weight", []int64{h, channels}, lin(h), l),
				mat(b+"attn_gate.weight", []int64{h, vd}, lin(h), l))
			if s.Arch == "qwen3next" {
				out = append(out, mat(b+"ssm_ba.weight", []int64{h, int64(2 * hs.VHeads)}, lin(h), l))
			} else {
				out = append(out,
					mat(b+"ssm_beta.weight", []int64{h, int64(hs.VHeads)}, lin(h), l),
					mat(b+"ssm_alpha.weight", []int64{h, int64(hs.VHeads)}, lin(h), l))
			}
			out = append(out,
				small(b+"ssm_conv1d.weight", []int64{int64(hs.ConvKernel), channels}, kindLinear, 0.5),
				small(b+"ssm_dt.bias", []int64{int64(hs.VHeads)}, kindLinear, 0.5),
				small(b+"ssm_a", []int64{int64(hs.VHeads)}, kindDecay, 1),
				norm(b+"ssm_norm.weight", int64(hs.VDim)),
				mat(b+"ssm_out.weight", []int64{vd, h}, lin(vd), l))
		} else {
			out = append(out,
				mat(b+"attn_q.weight", []int64{h, 2 * q}, lin(h), l),
				mat(b+"attn_k.weight", []int64{h, kv}, lin(h), l),
				mat(b+"attn_v.weight", []int64{h, kv}, lin(h), l),
				mat(b+"attn_output.weight", []int64{q, h}, attnOutGain*lin(q), l),
				norm(b+"attn_q_norm.weight", int64(s.HeadDim)),
				norm(b+"attn_k_norm.weight", int64(s.HeadDim)))
		}
		out = append(out,
			norm(b+"post_attention_norm.weight", h),
			tensorPlan{name: b + "ffn_gate_inp.weight", typ: quant.F32, ne: []int64{h, e}, kind: kindRouter,
				sigma: float32(routerGain / math.Sqrt(float64(h))), layer: l, unitRows: int(e)},
			expert(b+"ffn_gate_exps.weight", []int64{h, f, e}, lin(h), l),
			expert(b+"ffn_up_exps.weight", []int64{h, f, e}, lin(h), l),
			expert(b+"ffn_down_exps.weight", []int64{f, h, e}, lin(f), l),
			small(b+"ffn_gate_inp_shexp.weight", []int64{h}, kindLinear, lin(h)),
			mat(b+"ffn_gate_shexp.weight", []int64{h, sf}, lin(h), l),
			mat(b+"ffn_up_shexp.weight", []int64{h, sf}, lin(h), l),
			mat(b+"ffn_down_shexp.weight", []int64{sf, h}, lin(sf), l),
		)
	}
	return out
}

// planGptOss lists the tensors of a gpt-oss model: qwen3moe's without q/k norms, plus biases
// on q, k, v, o, the router and every expert product, and one sink per query head.
func planGptOss(s Spec) []tensorPlan {
	h, e, f := int64(s.Hidden), int64(s.Experts), int64(s.ExpertFFN)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	lin := func(fanIn int64) float32 { return float32(linearGain / math.Sqrt(float64(fanIn))) }
	dq := s.denseQuant()
	mat := func(name string, ne []int64, sigma float32, layer int) tensorPlan {
		return tensorPlan{name: name, typ: dq, ne: ne, kind: kindLinear, sigma: sigma, layer: layer, unitRows: rowsPerUnit}
	}
	vec := func(name string, ne []int64, sigma float32) tensorPlan {
		return tensorPlan{name: name, typ: quant.F32, ne: ne, kind: kindLinear, sigma: sigma, unitRows: rowsPerUnit}
	}
	norm := func(name string, n int64) tensorPlan {
		return tensorPlan{name: name, typ: quant.F32, ne: []int64{n}, kind: kindNorm, unitRows: 1}
	}
	expert := func(name string, ne []int64, sigma float32, layer int) tensorPlan {
		return tensorPlan{name: name, typ: s.Quant, ne: ne, kind: kindLinear, sigma: sigma, layer: layer, unitRows: int(ne[1])}
	}
	// A random router bias is a popularity of its own, on top of the Zipf skew that
	// --zipf and --hot-quarter set: with a skew asked for, the skew alone sets it.
	routerBias := float32(rBiasSigma)
	if s.skewed() {
		routerBias = 0
	}
	embed := mat("token_embd.weight", []int64{h, int64(s.Vocab)}, 1, -1)
	embed.kind = kindEmbed
	out := []tensorPlan{embed}
	for l := range s.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		out = append(out,
			norm(b+"attn_norm.weight", h),
			mat(b+"attn_q.weight", []int64{h, q}, lin(h), l), vec(b+"attn_q.bias", []int64{q}, biasSigma),
			mat(b+"attn_k.weight", []int64{h, kv}, lin(h), l), vec(b+"attn_k.bias", []int64{kv}, biasSigma),
			mat(b+"attn_v.weight", []int64{h, kv}, lin(h), l), vec(b+"attn_v.bias", []int64{kv}, biasSigma),
			mat(b+"attn_output.weight", []int64{q, h}, attnOutGain*lin(q), l), vec(b+"attn_output.bias", []int64{h}, attnOutGain*biasSigma),
			vec(b+"attn_sinks.weight", []int64{int64(s.Heads)}, sinkSigma),
			norm(b+"post_attention_norm.weight", h),
			tensorPlan{name: b + "ffn_gate_inp.weight", typ: quant.F32, ne: []int64{h, e}, kind: kindRouter,
				sigma: float32(routerGain / math.Sqrt(float64(h))), layer: l, unitRows: int(e)},
			vec(b+"ffn_gate_inp.bias", []int64{e}, routerBias),
			expert(b+"ffn_gate_exps.weight", []int64{h, f, e}, lin(h), l), vec(b+"ffn_gate_exps.bias", []int64{f, e}, biasSigma),
			expert(b+"ffn_up_exps.weight", []int64{h, f, e}, lin(h), l), vec(b+"ffn_up_exps.bias", []int64{f, e}, biasSigma),
			expert(b+"ffn_down_exps.weight", []int64{f, h, e}, lin(f), l), vec(b+"ffn_down_exps.bias", []int64{h, e}, biasSigma),
		)
	}
	return append(out,
		norm("output_norm.weight", h),
		mat("output.weight", []int64{h, int64(s.Vocab)}, float32(headGain/math.Sqrt(float64(h))), -1),
	)
}

// Write writes the model described by spec to path (through path+".tmp"). progress, if
// not nil, is called with bytes of tensor data written so far and the total.
func Write(ctx context.Context, path string, spec Spec, progress func(done, total int64)) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	voc, err := newVocabulary(spec.Vocab)
	if err != nil {
		return err
	}
	w := gguf.NewWriter()
	if err := addMetadata(w, spec, voc); err != nil {
		return err
	}
	g := newGenerator(spec)
	if spec.HotQuarter > 0 {
		if g.bal, err = g.newBalance(voc); err != nil {
			return err
		}
	}
	tensors := g.tensors
	var total int64
	for _, t := range tensors {
		rb, err := quant.RowBytes(t.typ, t.rowLen())
		if err != nil {
			return fmt.Errorf("synth: tensor %q: %w", t.name, err)
		}
		total += int64(rb) * int64(t.rows())
	}
	var done int64
	for _, t := range tensors {
		err := w.AddTensor(t.name, t.typ, t.ne, func(out io.Writer) error {
			return g.writeTensor(ctx, out, t, func(n int64) {
				done += n
				if progress != nil {
					progress(done, total)
				}
			})
		})
		if err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	slog.Debug("synth: writing", "path", path, "tensors", len(tensors), "bytes", total, "quant", spec.Quant, "pool", spec.Pool)
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// addMetadata writes the keys of a GGUF of s.Arch in convert_hf_to_gguf.py's order.
func addMetadata(w *gguf.Writer, s Spec, v vocabulary) error {
	ft, ok := fileType(s.Quant)
	if !ok {
		return fmt.Errorf("synth: no llama.cpp file type for %s", s.Quant)
	}
	a := s.Arch + "."
	w.AddString("general.architecture", s.Arch)
	w.AddString("general.type", "model")
	w.AddString("general.name", s.Name)
	w.AddUint32(a+"block_count", uint32(s.Layers))
	w.AddUint32(a+"context_length", uint32(s.Context))
	w.AddUint32(a+"embedding_length", uint32(s.Hidden))
	if IsHybrid(s.Arch) {
		addHybridMetadata(w, s)
	} else {
		w.AddUint32(a+"feed_forward_length", uint32(s.FFN))
		addAttentionMetadata(w, s)
	}
	w.AddUint32("general.file_type", ft)
	if !IsHybrid(s.Arch) {
		w.AddUint32(a+"expert_feed_forward_length", uint32(s.ExpertFFN))
	}
	w.AddUint32("general.quantization_version", 2)
	w.AddString("tokenizer.ggml.model", "gpt2")
	w.AddString("tokenizer.ggml.pre", preTokenizer(s))
	w.AddStrings("tokenizer.ggml.tokens", v.tokens)
	w.AddInt32s("tokenizer.ggml.token_type", v.types)
	w.AddStrings("tokenizer.ggml.merges", v.merges)
	w.AddUint32("tokenizer.ggml.eos_token_id", uint32(v.eos))
	w.AddUint32("tokenizer.ggml.padding_token_id", uint32(v.pad))
	w.AddUint32("tokenizer.ggml.bos_token_id", uint32(v.bos))
	w.AddBool("tokenizer.ggml.add_bos_token", false)
	if hasChatTemplate(s) {
		w.AddString("tokenizer.chat_template", chatTemplate)
	}
	return nil
}

// preTokenizer is the file's tokenizer.ggml.pre.
func preTokenizer(s Spec) string {
	if s.Arch == "gpt-oss" {
		return "gpt-4o"
	}
	return "qwen2"
}

// hasChatTemplate says whether the file carries chatTemplate: gpt-oss chats through the
// engine's built-in Harmony template.
func hasChatTemplate(s Spec) bool { return s.Arch != "gpt-oss" }

// addAttentionMetadata writes the attention, rope and expert keys of qwen3moe and gpt-oss
// (which adds YaRN and the sliding window).
func addAttentionMetadata(w *gguf.Writer, s Spec) {
	a := s.Arch + "."
	w.AddUint32(a+"attention.head_count", uint32(s.Heads))
	w.AddUint32(a+"attention.head_count_kv", uint32(s.KVHeads))
	if s.Arch == "gpt-oss" || s.YarnFactor > 0 { // a qwen3moe file may configure YaRN too
		w.AddString(a+"rope.scaling.type", "yarn")
		w.AddFloat32(a+"rope.scaling.factor", float32(s.YarnFactor))
		w.AddUint32(a+"rope.scaling.original_context_length", uint32(s.YarnOrigContext))
	}
	w.AddFloat32(a+"rope.freq_base", float32(s.RopeBase))
	w.AddFloat32(a+"attention.layer_norm_rms_epsilon", float32(s.RMSEps))
	w.AddUint32(a+"expert_count", uint32(s.Experts))
	w.AddUint32(a+"expert_used_count", uint32(s.ExpertsUsed))
	w.AddUint32(a+"attention.key_length", uint32(s.HeadDim))
	w.AddUint32(a+"attention.value_length", uint32(s.HeadDim))
	if s.Arch == "gpt-oss" {
		w.AddUint32(a+"attention.sliding_window", uint32(s.SlidingWindow))
	}
}

// addHybridMetadata writes the keys of qwen35moe and qwen3next in the order of the shared
// fixtures' qwen35moe file; qwen3next has no rope sections.
func addHybridMetadata(w *gguf.Writer, s Spec) {
	a, hs := s.Arch+".", s.Hybrid
	w.AddUint32(a+"attention.head_count", uint32(s.Heads))
	w.AddUint32(a+"attention.head_count_kv", uint32(s.KVHeads))
	if s.Arch == "qwen35moe" {
		// The rotated pairs split in three as Qwen3.5's are (32 pairs: 11, 11, 10); text uses
		// one position for all three, so the split does not change a text forward pass.
		p := int32(hs.RopeDims / 2)
		s1 := (p + 2) / 3
		s2 := (p - s1 + 1) / 2
		w.AddInt32s(a+"rope.dimension_sections", []int32{s1, s2, p - s1 - s2, 0})
	}
	w.AddFloat32(a+"rope.freq_base", float32(s.RopeBase))
	w.AddFloat32(a+"attention.layer_norm_rms_epsilon", float32(s.RMSEps))
	w.AddUint32(a+"expert_count", uint32(s.Experts))
	w.AddUint32(a+"expert_used_count", uint32(s.ExpertsUsed))
	w.AddUint32(a+"attention.key_length", uint32(s.HeadDim))
	w.AddUint32(a+"attention.value_length", uint32(s.HeadDim))
	w.AddUint32(a+"expert_feed_forward_length", uint32(s.ExpertFFN))
	w.AddUint32(a+"expert_shared_feed_forward_length", uint32(hs.SharedFFN))
	w.AddUint32(a+"ssm.conv_kernel", uint32(hs.ConvKernel))
	w.AddUint32(a+"ssm.state_size", uint32(hs.KDim))
	w.AddUint32(a+"ssm.group_count", uint32(hs.KHeads))
	w.AddUint32(a+"ssm.time_step_rank", uint32(hs.VHeads))
	w.AddUint32(a+"ssm.inner_size", uint32(hs.VHeads*hs.VDim))
	w.AddUint32(a+"full_attention_interval", uint32(hs.AttnEvery))
	w.AddUint32(a+"rope.dimension_count", uint32(hs.RopeDims))
}

// generator draws and quantises tensors. It is shared by the workers of one Write.
type generator struct {
	spec    Spec
	tensors []tensorPlan // plan(spec)
	workers int
	dir     []float32 // the shared direction u (unit length), when skewed
	bal     *balance  // what the routers are balanced on, under Spec.HotQuarter

	mu    sync.Mutex
	pools map[poolKey]*blockPool
}

type poolKey struct {
	typ     quant.Type
	sigma   float32
	withDir bool // blocks carry the shared direction (embeddings under Zipf skew)
}

// blockPool holds quantised blocks of N(0, sigma²) values. When a per-column offset is
// added (the shared direction), the offset differs by column, so there is one set of
// blocks per block position in the row.
type blockPool struct {
	once      sync.Once
	positions int // block positions with their own blocks (1: any block fits anywhere)
	perPos    int // blocks per position
	blocks    []byte
	err       error
}

// poolChunk is how many pool blocks one unit of work draws (fixed, so the pool does not
// depend on the number of workers).
const poolChunk = 512

func newGenerator(s Spec) *generator {
	g := &generator{spec: s, tensors: plan(s), workers: runtime.GOMAXPROCS(0), pools: make(map[poolKey]*blockPool)}
	if s.skewed() {
		g.dir = make([]float32, s.Hidden)
		fillNormal(stream(s.Seed, "zipf.direction", 0), g.dir, 1)
		normalize(g.dir)
	}
	return g
}

func normalize(x []float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss))
	for i := range x {
		x[i] *= inv
	}
}

// pooled reports whether tensor t is assembled from a block pool.
func (g *generator) pooled(t tensorPlan) bool {
	if g.spec.Pool == 0 || t.kind != kindLinear && t.kind != kindEmbed {
		return false
	}
	switch t.typ {
	case quant.F32, quant.F16, quant.BF16:
		return false // converting is as cheap as copying
	}
	return true
}

// pool returns the block pool of tensor t, building it on first use.
func (g *generator) pool(t tensorPlan) (*blockPool, error) {
	key := poolKey{t.typ, t.sigma, t.kind == kindEmbed && g.dir != nil}
	g.mu.Lock()
	p := g.pools[key]
	if p == nil {
		p = &blockPool{positions: 1}
		if key.withDir {
			p.positions = t.rowLen() / t.typ.BlockSize()
		}
		p.perPos = max(g.spec.Pool/p.positions, poolChunk)
		g.pools[key] = p
	}
	g.mu.Unlock()
	p.once.Do(func() { p.err = g.buildPool(p, key) })
	return p, p.err
}

// buildPool draws and quantises the pool's blocks, poolChunk at a time on the workers.
func (g *generator) buildPool(p *blockPool, key poolKey) error {
	bs, bb := key.typ.BlockSize(), key.typ.BlockBytes()
	total := p.positions * p.perPos
	p.blocks = make([]byte, total*bb)
	name := fmt.Sprintf("pool.%s.%08x.%v", key.typ, math.Float32bits(key.sigma), key.withDir)
	amp := float32(dcAmplitude * math.Sqrt(float64(bs*p.positions)))
	chunks := (total + poolChunk - 1) / poolChunk
	return parallelFor(g.workers, chunks, func(c int) error {
		r := stream(g.spec.Seed, name, c)
		vals := make([]float32, bs)
		for i := c * poolChunk; i < min((c+1)*poolChunk, total); i++ {
			fillNormal(r, vals, key.sigma)
			if key.withDir {
				dir := g.dir[i/p.perPos*bs:]
				for j := range vals {
					vals[j] += amp * dir[j]
				}
			}
			if err := quant.Quantize(key.typ, vals, p.blocks[i*bb:(i+1)*bb]); err != nil {
				return err
			}
		}
		return nil
	})
}

// parallelFor runs f(0..n-1) on up to workers goroutines and returns the first error.
func parallelFor(workers, n int, f func(i int) error) error {
	var (
		mu   sync.Mutex
		next int
		err  error
		wg   sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := err != nil
				mu.Unlock()
				if stop || i >= n {
					return
				}
				if e := f(i); e != nil {
					mu.Lock()
					if err == nil {
						err = e
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return err
}

// writeTensor makes tensor t unit by unit on the workers and writes the units in order.
func (g *generator) writeTensor(ctx context.Context, out io.Writer, t tensorPlan, wrote func(int64)) error {
	rowBytes, err := quant.RowBytes(t.typ, t.rowLen())
	if err != nil {
		return err
	}
	rows := t.rows()
	units := (rows + t.unitRows - 1) / t.unitRows
	fill := func(u int, dst []byte) error { return g.fillUnit(t, u, dst) }
	return ordered(ctx, out, units, t.unitRows*rowBytes, g.workers, func(u int) int {
		return min(t.unitRows, rows-u*t.unitRows) * rowBytes
	}, fill, wrote)
}

// fillUnit makes unit u of tensor t (its rows from u·t.unitRows) into dst.
func (g *generator) fillUnit(t tensorPlan, u int, dst []byte) error {
	rowBytes, err := quant.RowBytes(t.typ, t.rowLen())
	if err != nil {
		return err
	}
	first := u * t.unitRows
	n := min(t.unitRows, t.rows()-first)
	r := stream(g.spec.Seed, t.name, u)
	if g.pooled(t) {
		pool, err := g.pool(t)
		if err != nil {
			return err
		}
		pool.assemble(r, t.typ, dst[:n*rowBytes], rowBytes)
		return nil
	}
	return g.draw(r, t, first, n, dst[:n*rowBytes], rowBytes)
}

// assemble fills whole rows of dst with blocks picked at random from the pool (from
// the block's own position when positions differ).
func (p *blockPool) assemble(r *rand.PCG, typ quant.Type, dst []byte, rowBytes int) {
	bb := typ.BlockBytes()
	for row := 0; row < len(dst); row += rowBytes {
		for k := 0; k < rowBytes/bb; k++ {
			pos := 0
			if p.positions > 1 {
				pos = k
			}
			i := pos*p.perPos + pick(r, p.perPos)
			copy(dst[row+k*bb:row+(k+1)*bb], p.blocks[i*bb:(i+1)*bb])
		}
	}
}

// draw generates rows [first, first+n) of t and quantises them into dst.
func (g *generator) draw(r *rand.PCG, t tensorPlan, first, n int, dst []byte, rowBytes int) error {
	if t.kind == kindRouter && g.bal != nil {
		return g.drawBalancedRouter(r, t, first, n, dst, rowBytes)
	}
	row := make([]float32, t.rowLen())
	var bias []float32
	rowSigma := t.sigma
	if t.kind == kindRouter && g.dir != nil {
		bias, rowSigma = g.routerSkew(t.layer, t.sigma)
	}
	for i := range n {
		switch t.kind {
		case kindDecay:
			fillNormal(r, row, 1)
			for j := range row {
				row[j] = -0.1 - float32(math.Abs(float64(row[j])))
			}
		case kindNorm:
			fillNormal(r, row, normSpread)
			for j := range row {
				row[j] += 1
			}
		case kindEmbed:
			fillNormal(r, row, t.sigma)
			if g.dir != nil {
				amp := float32(dcAmplitude * math.Sqrt(float64(len(row))))
				for j := range row {
					row[j] += amp * g.dir[j]
				}
			}
		case kindRouter:
			fillNormal(r, row, rowSigma)
			if g.dir != nil {
				projectOut(row, g.dir)
				b := bias[first+i]
				for j := range row {
					row[j] += b * g.dir[j]
				}
			}
		default:
			fillNormal(r, row, t.sigma)
		}
		if err := quant.Quantize(t.typ, row, dst[i*rowBytes:(i+1)*rowBytes]); err != nil {
			return err
		}
	}
	return nil
}

// zipfRanks is expert e's popularity rank (0 = most popular) in a layer: a random
// permutation per layer.
func (g *generator) zipfRanks(layer int) []int {
	ranks := make([]int, g.spec.Experts)
	for i := range ranks {
		ranks[i] = i
	}
	r := stream(g.spec.Seed, "zipf.ranks", layer)
	for i := len(ranks) - 1; i > 0; i-- {
		j := pick(r, i+1)
		ranks[i], ranks[j] = ranks[j], ranks[i]
	}
	return ranks
}

// projectOut removes x's component along the unit vector u.
func projectOut(x, u []float32) {
	var dot float32
	for j := range x {
		dot += x[j] * u[j]
	}
	for j := range x {
		x[j] -= dot * u[j]
	}
}

// routerSkew returns each expert's coefficient along the shared direction in this
// layer's router, and the standard deviation of the rest of its row. Ranks are a
// per-layer random permutation, so different layers favour different experts.
func (g *generator) routerSkew(layer int, sigma float32) ([]float32, float32) {
	s := g.spec
	ranks := g.zipfRanks(layer)
	along := math.Sqrt(float64(s.Hidden)) * streamCos() // expected u·h after RMSNorm
	bias := make([]float32, s.Experts)
	for e, rank := range ranks {
		bias[e] = float32(-s.Zipf * math.Log(float64(rank+1)) / along)
	}
	return bias, orthogonalSigma(sigma)
}

// streamCos is the cos of the angle between the residual stream and u at a router.
func streamCos() float64 {
	a2 := dcAmplitude * dcAmplitude
	return math.Sqrt(a2 / (a2 + 1))
}

// orthogonalSigma is the spread of a skewed router row's part orthogonal to u: that part
// sees only the share sqrt(1-cos²) of h, so it is widened to keep the token-dependent
// logit spread of the recipe.
func orthogonalSigma(sigma float32) float32 {
	cos := streamCos()
	return float32(float64(sigma) / math.Sqrt(1-cos*cos))
}

// ordered runs fill for units 0..n-1 on workers goroutines and writes the results to out
// in unit order. Buffers are taken in unit order before a unit is handed out, so the unit
// the writer waits for always has one: no deadlock, and at most 2·workers buffers live.
func ordered(ctx context.Context, out io.Writer, n, maxBytes, workers int, size func(u int) int,
	fill func(u int, dst []byte) error, wrote func(int64)) error {
	type job struct {
		u   int
		buf []byte
	}
	type result struct {
		buf []byte
		err error
	}
	nbuf := min(2*workers, n)
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, maxBytes)
	}
	ready := make([]chan result, n)
	for i := range ready {
		ready[i] = make(chan result, 1)
	}
	jobs := make(chan job)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // feeder
		defer wg.Done()
		defer close(jobs)
		for u := range n {
			var buf []byte
			select {
			case buf = <-free:
			case <-quit:
				return
			}
			select {
			case jobs <- job{u, buf[:size(u)]}:
			case <-quit:
				return
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				err := ctx.Err()
				if err == nil {
					err = fill(j.u, j.buf)
				}
				ready[j.u] <- result{j.buf, err}
			}
		}()
	}
	defer wg.Wait()
	defer close(quit)
	for u := range n {
		var res result
		select {
		case res = <-ready[u]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if res.err != nil {
			return res.err
		}
		if _, err := out.Write(res.buf); err != nil {
			return err
		}
		wrote(int64(len(res.buf)))
		free <- res.buf[:cap(res.buf)]
	}
	return nil
}
