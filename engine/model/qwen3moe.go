package model

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"strata/engine/compute"
	"strata/engine/gguf"
	"strata/engine/quant"
)

// layer holds one transformer block's weights on the backend: a norm, a mixer (attention, or
// in the hybrids a Gated DeltaNet), a norm and the MoE.
type layer struct {
	attnNorm compute.Weight
	attn     *attention // nil in a Gated DeltaNet layer
	delta    *deltaNet  // nil in an attention layer
	ffnNorm  compute.Weight
	router   compute.Weight
	rBias    compute.Weight // the router's bias (gpt-oss); nil when none
	experts  compute.Experts
	shared   *sharedExpert // nil when the MoE has none
}

// attention is a full-attention block's weights. The hybrids gate its output by
// sigmoid(gate·x) per value and rotate only part of each head.
type attention struct {
	q, k, v, o, qNorm, kNorm compute.Weight // qNorm, kNorm nil when absent (gpt-oss)
	gate                     compute.Weight // nil when ungated
	kvLayer                  int            // the layer's index in the KV cache
	// gpt-oss: biases on the projections, a sink logit per query head and, on sliding
	// layers, a window (see compute.AttentionSpec); nil or 0 elsewhere.
	qBias, kBias, vBias, oBias, sinks compute.Weight
	window                            int
}

// sharedExpert is an expert every token runs, weighted by sigmoid(router·x).
type sharedExpert struct{ router, gate, up, down compute.Weight }

// Model is a loaded qwen3moe, qwen35moe or qwen3next: hyper-parameters and weights placed on
// one backend.
type Model struct {
	H           Hparams
	b           compute.Backend
	hy          compute.Hybrid // b's hybrid operations (hybrid models only)
	embd        compute.Weight
	outNorm     compute.Weight
	out         compute.Weight
	layers      []layer
	kvLayers    int           // attention layers
	deltaLayers int           // Gated DeltaNet layers
	rope        *compute.Rope // RoPE as a frequency table (gpt-oss's YaRN); nil: RoPENeoX over H.RopeBase
}

// ExpertTensors names the three stacked expert tensors of layer l, for tier code.
func ExpertTensors(l int) [3]string {
	return [3]string{
		fmt.Sprintf("blk.%d.ffn_gate_exps.weight", l),
		fmt.Sprintf("blk.%d.ffn_up_exps.weight", l),
		fmt.Sprintf("blk.%d.ffn_down_exps.weight", l),
	}
}

// ExpertPlacer takes one layer's three stacked expert tensors (gate, up, down, as they sit in
// the file) and returns what runs them. The expert tiers use it to keep experts off the
// backend; nil places them on the backend like every other tensor.
type ExpertPlacer func(layer int, gate, up, down compute.WeightSpec) (compute.Experts, error)

// Load reads the hyper-parameters and places every tensor on b. progress (may be nil) gets
// bytes placed so far and the total.
func Load(f *gguf.File, b compute.Backend, progress func(done, total int64)) (*Model, error) {
	return LoadWith(f, b, progress, nil)
}

// loader places a file's tensors on a backend, checking names and shapes.
type loader struct {
	f           *gguf.File
	b           compute.Backend
	done, total int64
	progress    func(done, total int64)
}

// spec checks tensor name against rows x cols (x experts) and describes its bytes. A
// one-row tensor may be stored 1-D or, as converters write some, [cols, 1].
func (ld *loader) spec(name string, rows, cols, experts int) (compute.WeightSpec, error) {
	f := ld.f
	t, ok := f.Tensor(name)
	if !ok {
		return compute.WeightSpec{}, fmt.Errorf("model: %s: tensor %q is missing", f.Path, name)
	}
	want := []int64{int64(cols), int64(rows)}
	if experts > 1 {
		want = append(want, int64(experts))
	}
	if rows == 1 && experts <= 1 && len(t.Ne) == 1 {
		want = want[:1]
	}
	if !slices.Equal(t.Ne, want) {
		return compute.WeightSpec{}, fmt.Errorf("model: %s: tensor %q has shape %v, want %v", f.Path, name, t.Ne, want)
	}
	if !quant.CanDequantize(t.Type) {
		return compute.WeightSpec{}, fmt.Errorf("model: %s: tensor %q has type %s, which Strata cannot compute with yet", f.Path, name, t.Type)
	}
	return compute.WeightSpec{Name: name, Type: t.Type, Rows: rows, Cols: cols, Experts: experts, Data: f.TensorData(t)}, nil
}

func (ld *loader) placed(bytes int) {
	ld.done += int64(bytes)
	if ld.progress != nil {
		ld.progress(ld.done, ld.total)
	}
}

func (ld *loader) placeSpec(s compute.WeightSpec) (compute.Weight, error) {
	w, err := ld.b.Place(s)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", ld.f.Path, err)
	}
	return w, nil
}

func (ld *loader) place(name string, rows, cols, experts int) (compute.Weight, error) {
	s, err := ld.spec(name, rows, cols, experts)
	if err != nil {
		return nil, err
	}
	w, err := ld.placeSpec(s)
	if err == nil {
		ld.placed(len(s.Data))
	}
	return w, err
}

// LoadWith is Load with the layers' experts handed to placeExperts.
func LoadWith(f *gguf.File, b compute.Backend, progress func(done, total int64), placeExperts ExpertPlacer) (*Model, error) {
	h, err := ReadHparams(f)
	if err != nil {
		return nil, err
	}
	m := &Model{H: h, b: b}
	if h.Hybrid.On {
		hy, ok := b.(compute.Hybrid)
		if !ok {
			return nil, fmt.Errorf("model: %s: the %s backend cannot run %s's Gated DeltaNet layers yet; use --backend cpu", f.Path, b.Name(), h.Arch)
		}
		m.hy = hy
	}
	ld := &loader{f: f, b: b, progress: progress}
	for _, t := range f.Tensors {
		ld.total += t.Size
	}
	if h.Yarn != nil { // qwen3moe files may configure YaRN to go past their trained context
		m.rope = tableRope(h)
	}
	if h.Arch == "gpt-oss" {
		m.rope = tableRope(h)
		tiers := placeExperts
		placeExperts = func(l int, g, u, d compute.WeightSpec) (compute.Experts, error) {
			return placeGptOssExperts(ld, h, l, g, u, d, tiers)
		}
	}
	if placeExperts == nil {
		placeExperts = func(_ int, g, u, d compute.WeightSpec) (compute.Experts, error) {
			var e compute.BackendExperts
			e.B = b
			for _, p := range []struct {
				dst *compute.Weight
				s   compute.WeightSpec
			}{{&e.Gate, g}, {&e.Up, u}, {&e.Down, d}} {
				w, err := b.Place(p.s)
				if err != nil {
					return nil, err
				}
				*p.dst = w
			}
			return e, nil
		}
	}
	if m.embd, err = ld.place("token_embd.weight", h.Vocab, h.Hidden, 1); err != nil {
		return nil, err
	}
	// The norm before the MoE: qwen3moe's ffn_norm is the hybrids' and gpt-oss's
	// post_attention_norm.
	ffnNorm := "ffn_norm"
	if h.Hybrid.On || h.Arch == "gpt-oss" {
		ffnNorm = "post_attention_norm"
	}
	for l := range h.Layers {
		var L layer
		p := func(dst *compute.Weight, suffix string, rows, cols, experts int) {
			if err == nil {
				*dst, err = ld.place(fmt.Sprintf("blk.%d.%s.weight", l, suffix), rows, cols, experts)
			}
		}
		p(&L.attnNorm, "attn_norm", 1, h.Hidden, 1)
		if err != nil {
			return nil, err
		}
		if h.Hybrid.On && h.Recurrent[l] {
			L.delta, err = loadDeltaNet(ld, h, l, m.deltaLayers)
			m.deltaLayers++
		} else {
			L.attn, err = loadAttention(ld, h, l, m.kvLayers)
			m.kvLayers++
		}
		if err != nil {
			return nil, err
		}
		p(&L.ffnNorm, ffnNorm, 1, h.Hidden, 1)
		p(&L.router, "ffn_gate_inp", h.Experts, h.Hidden, 1)
		if err == nil && h.Arch == "gpt-oss" {
			L.rBias, err = ld.place(fmt.Sprintf("blk.%d.ffn_gate_inp.bias", l), 1, h.Experts, 1)
		}
		if err != nil {
			return nil, err
		}
		names := ExpertTensors(l)
		var g, u, d compute.WeightSpec
		if g, err = ld.spec(names[0], h.ExpertFFN, h.Hidden, h.Experts); err != nil {
			return nil, err
		}
		if u, err = ld.spec(names[1], h.ExpertFFN, h.Hidden, h.Experts); err != nil {
			return nil, err
		}
		if d, err = ld.spec(names[2], h.Hidden, h.ExpertFFN, h.Experts); err != nil {
			return nil, err
		}
		if L.experts, err = placeExperts(l, g, u, d); err != nil {
			return nil, fmt.Errorf("model: %s: layer %d experts: %w", f.Path, l, err)
		}
		ld.placed(len(g.Data) + len(u.Data) + len(d.Data))
		if h.SharedFFN > 0 {
			var sh sharedExpert
			p(&sh.router, "ffn_gate_inp_shexp", 1, h.Hidden, 1)
			p(&sh.gate, "ffn_gate_shexp", h.SharedFFN, h.Hidden, 1)
			p(&sh.up, "ffn_up_shexp", h.SharedFFN, h.Hidden, 1)
			p(&sh.down, "ffn_down_shexp", h.Hidden, h.SharedFFN, 1)
			if err != nil {
				return nil, err
			}
			L.shared = &sh
		}
		m.layers = append(m.layers, L)
	}
	if m.outNorm, err = ld.place("output_norm.weight", 1, h.Hidden, 1); err != nil {
		return nil, err
	}
	outName := "output.weight"
	if _, ok := f.Tensor(outName); !ok {
		outName = "token_embd.weight" // tied embeddings
	}
	if m.out, err = ld.place(outName, h.Vocab, h.Hidden, 1); err != nil {
		return nil, err
	}
	return m, nil
}

// loadAttention places layer l's attention weights. A hybrid's attn_q holds per head the
// query rows, then as many gate rows; they are split into two weights here, so each is a
// plain product.
func loadAttention(ld *loader, h Hparams, l int, kvLayer int) (*attention, error) {
	a := &attention{kvLayer: kvLayer}
	qDim, kvDim := h.Heads*h.HeadDim, h.KVHeads*h.HeadDim
	name := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", l, s) }
	var err error
	if h.Hybrid.On {
		qg, err := ld.spec(name("attn_q"), 2*qDim, h.Hidden, 1)
		if err != nil {
			return nil, err
		}
		halves, err := splitRows(qg, h.Heads, []int{h.HeadDim, h.HeadDim})
		if err != nil {
			return nil, fmt.Errorf("model: %s: %w", ld.f.Path, err)
		}
		if a.q, err = ld.placeSpec(halves[0]); err != nil {
			return nil, err
		}
		if a.gate, err = ld.placeSpec(halves[1]); err != nil {
			return nil, err
		}
		ld.placed(len(qg.Data))
	} else if a.q, err = ld.place(name("attn_q"), qDim, h.Hidden, 1); err != nil {
		return nil, err
	}
	p := func(dst *compute.Weight, suffix string, rows, cols int) {
		if err == nil {
			*dst, err = ld.place(name(suffix), rows, cols, 1)
		}
	}
	p(&a.k, "attn_k", kvDim, h.Hidden)
	p(&a.v, "attn_v", kvDim, h.Hidden)
	p(&a.o, "attn_output", h.Hidden, qDim)
	if h.Arch == "gpt-oss" {
		if err == nil {
			err = loadGptOssAttention(ld, h, l, a)
		}
		return a, err
	}
	p(&a.qNorm, "attn_q_norm", 1, h.HeadDim)
	p(&a.kNorm, "attn_k_norm", 1, h.HeadDim)
	return a, err
}

// splitRows cuts the rows of a matrix made of groups repeats of parts (e.g. per head: query
// rows, then gate rows) into one matrix per part, groups in order. Quantised rows are whole
// blocks, so rows move as bytes.
func splitRows(s compute.WeightSpec, groups int, parts []int) ([]compute.WeightSpec, error) {
	per := 0
	for _, p := range parts {
		per += p
	}
	if per*groups != s.Rows {
		return nil, fmt.Errorf("tensor %q: %d rows do not split into %d groups of %v", s.Name, s.Rows, groups, parts)
	}
	rb, err := quant.RowBytes(s.Type, s.Cols)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", s.Name, err)
	}
	if len(s.Data) != rb*s.Rows {
		return nil, fmt.Errorf("tensor %q: %d bytes, want %d", s.Name, len(s.Data), rb*s.Rows)
	}
	out := make([]compute.WeightSpec, len(parts))
	off := 0
	for i, p := range parts {
		data := make([]byte, 0, groups*p*rb)
		for g := range groups {
			r0 := g*per + off
			data = append(data, s.Data[r0*rb:(r0+p)*rb]...)
		}
		out[i] = compute.WeightSpec{Name: fmt.Sprintf("%s[part %d]", s.Name, i), Type: s.Type, Rows: groups * p, Cols: s.Cols, Data: data}
		off += p
	}
	return out, nil
}

// Observer receives intermediate results of a forward pass (for the expert profile, the tier
// map's hit counts and tests). Any method may be a no-op.
type Observer interface {
	Routes(layer int, r compute.Routes)
}

// HiddenObserver is an Observer that also sees the residual stream, as transformers'
// hidden states (for tests against them): stage 0 the embeddings, stage 1+l the stream after
// layer l, stage Layers+1 the output norm's result; rows x Hidden values each (the output
// norm's rows are those whose logits the pass computes). Reading them costs a copy per layer.
type HiddenObserver interface {
	Observer
	Hidden(stage int, x []float32)
}

// State is one sequence's KV cache, the hybrids' recurrent state and scratch space.
type State struct {
	kv       compute.KV
	capacity int
	pos      int // tokens in the cache
	rec      recurrent
	buf      scratch
	n        int // tokens the scratch is sized for
	logits   compute.Buf
	rows     int  // logit rows the logits buffer holds
	rowsSet  bool // ReserveScratch fixed rows: passes compute their logits in chunks of it
	batch    int  // most tokens one pass may add when ring layers hold window+batch-1 positions; 0: any
}

type scratch struct {
	x, xn, q, k, v, gate, att, proj, routerLogits, sharedLogits compute.Buf
	delta                                                       deltaScratch
}

// NewState allocates a KV cache of ctx positions (for the attention layers) and the
// recurrent state of the Gated DeltaNet layers.
func (m *Model) NewState(ctx int, kvType string) (*State, error) {
	return m.newState(ctx, kvType, true)
}

// newState is NewState; without rings, sliding-window layers keep every position (tests
// compare the two).
func (m *Model) newState(ctx int, kvType string, rings bool) (*State, error) {
	s := &State{capacity: ctx}
	if m.kvLayers > 0 {
		var keep []int
		if rings {
			keep = m.H.KVKeep(ctx)
		}
		kv, err := m.b.NewKV(compute.KVSpec{Layers: m.kvLayers, KVHeads: m.H.KVHeads, HeadDim: m.H.HeadDim, Positions: ctx, Type: kvType, Keep: keep})
		if err != nil {
			return nil, err
		}
		s.kv = kv
		if keep != nil {
			s.batch = ringBatch
		}
	}
	s.rec = m.newRecurrent()
	return s, nil
}

// Pos is the number of tokens in the cache.
func (s *State) Pos() int { return s.pos }

// ScratchTokens is the most tokens one pass has sized the scratch for: the longest chunk a
// caller passed, not the prompt (the activations stay bounded however long it is).
func (s *State) ScratchTokens() int { return s.n }

// Capacity is the cache size in tokens.
func (s *State) Capacity() int { return s.capacity }

// Rewind forgets the cache beyond pos tokens (to reuse a shared prefix) and returns the
// position it kept. A KV cache keeps any prefix; a recurrent state goes back only to a
// checkpoint (see recurrent), and a ring layer (see KVKeep) only as far as it still holds
// the window before pos (else to 0), so the caller re-reads the tokens from there.
func (s *State) Rewind(pos int) int {
	pos = max(pos, 0)
	if pos < s.pos {
		if s.batch > 0 && s.pos-pos >= s.batch {
			pos = 0 // the ring has overwritten keys the positions after pos would see
		}
		s.pos = s.rec.rewind(pos)
	}
	return s.pos
}

// Checkpoint keeps the recurrent state at the current position, so that Rewind can come back
// to it (nothing for a model without recurrent layers).
func (s *State) Checkpoint() { s.rec.checkpoint(s.pos) }

// Recurrent reports whether the state has layers that Rewind cannot truncate at will.
func (s *State) Recurrent() bool { return len(s.rec.layers) > 0 }

// ScratchFloats is the float32 scratch a forward pass of n tokens takes on its backend: the
// hidden state, the projections, the router logits, the hybrids' gate and Gated DeltaNet
// buffers, and one row of logits (the planner sizes the GPU's activations from it; after
// ReserveScratch an all-logits pass computes its rows one at a time in that row, without
// it the pass takes n rows). It follows ensureScratch and logitsBuf.
func (h Hparams) ScratchFloats(n int) int {
	f := n * (3*h.Hidden + 2*h.Heads*h.HeadDim + 2*h.KVHeads*h.HeadDim + h.Experts)
	if h.Hybrid.On {
		s := h.SSM
		channels := 2*s.KHeads*s.KDim + s.VHeads*s.VDim
		f += n * (h.Heads*h.HeadDim + 1 + 2*channels + 2*s.VHeads*s.VDim + 2*s.VHeads)
	}
	return f + h.Vocab
}

// ReserveScratch sizes s's scratch for passes of up to n tokens and its logits for one row
// now: scratch grows on demand, and a grown backend buffer leaves the old one allocated.
// From then on the logits buffer stays at that row: a pass that wants every row's logits
// (eval) computes them a row at a time (see forward), so what ScratchFloats counted is all
// the state ever takes, whoever the caller.
func (m *Model) ReserveScratch(s *State, n int) {
	if s.batch > 0 {
		n = min(n, s.batch) // longer batches run as passes of s.batch
	}
	m.ensureScratch(s, n)
	m.logitsBuf(s, 1)
	s.rowsSet = true
}

func (m *Model) ensureScratch(s *State, n int) {
	if s.n >= n {
		return
	}
	h := m.H
	b := m.b
	s.buf = scratch{
		x: b.NewBuf(n * h.Hidden), xn: b.NewBuf(n * h.Hidden),
		q: b.NewBuf(n * h.Heads * h.HeadDim), k: b.NewBuf(n * h.KVHeads * h.HeadDim), v: b.NewBuf(n * h.KVHeads * h.HeadDim),
		att: b.NewBuf(n * h.Heads * h.HeadDim), proj: b.NewBuf(n * h.Hidden),
		routerLogits: b.NewBuf(n * h.Experts),
	}
	if h.Hybrid.On {
		s.buf.gate = b.NewBuf(n * h.Heads * h.HeadDim)
		s.buf.sharedLogits = b.NewBuf(n)
		s.buf.delta = m.newDeltaScratch(n)
	}
	s.n = n
}

// logitsBuf holds rows x vocab logits; most steps need one row, so it grows only for evals,
// and never once ReserveScratch has fixed it.
func (m *Model) logitsBuf(s *State, rows int) compute.Buf {
	if s.rows < rows && !s.rowsSet {
		s.logits, s.rows = m.b.NewBuf(rows*m.H.Vocab), rows
	}
	return s.logits
}

// Forward runs tokens through the model at the state's next positions and appends them to
// its cache. It writes the logits of the last token to logits (len Vocab), or of every token
// when allLogits is set (len n*Vocab). A batch longer than a ring layer takes at once (see
// KVKeep) runs as several passes, each reporting its routes to obs.
func (m *Model) Forward(s *State, tokens []int, allLogits bool, logits []float32, obs Observer) error {
	return m.forwardChecked(s, tokens, allLogits, logits, nil, obs)
}

// CanArgmax reports whether ForwardArgmax runs on this model's backend.
func (m *Model) CanArgmax() bool {
	_, ok := m.b.(compute.ArgmaxReader)
	return ok
}

// ForwardArgmax is Forward of one token that returns the index of its largest logit (the
// first on ties, as sample.Argmax) instead of the logits, found by the backend: greedy
// decoding without a penalty needs nothing else, and a GPU then downloads one id, not the
// vocabulary's row. It fails when CanArgmax is false.
func (m *Model) ForwardArgmax(s *State, token int, obs Observer) (int, error) {
	ar, ok := m.b.(compute.ArgmaxReader)
	if !ok {
		return 0, fmt.Errorf("model: the %s backend finds no argmax", m.b.Name())
	}
	id := 0
	err := m.forwardChecked(s, []int{token}, false, nil, func(out compute.Buf) { id = ar.ReadArgmax(out, m.H.Vocab) }, obs)
	return id, err
}

// forwardChecked is Forward; read (nil: Read into logits) takes the last row's logits on
// the device instead.
func (m *Model) forwardChecked(s *State, tokens []int, allLogits bool, logits []float32, read func(compute.Buf), obs Observer) error {
	h := m.H
	n := len(tokens)
	if n == 0 {
		return fmt.Errorf("model: forward of no tokens")
	}
	if s.pos+n > s.capacity {
		return fmt.Errorf("model: %d tokens do not fit: %d of %d context positions are used", n, s.pos, s.capacity)
	}
	for _, t := range tokens {
		if t < 0 || t >= h.Vocab {
			return fmt.Errorf("model: token id %d is outside the vocabulary of %d", t, h.Vocab)
		}
	}
	if s.batch == 0 || n <= s.batch {
		return m.forward(s, tokens, allLogits, logits, read, obs)
	}
	for i := 0; i < n; i += s.batch {
		part := tokens[i:min(i+s.batch, n)]
		out := logits
		switch {
		case allLogits:
			out = logits[i*h.Vocab : (i+len(part))*h.Vocab]
		case i+len(part) < n:
			out = make([]float32, h.Vocab) // only the last token's logits are wanted
		}
		last := read
		if i+len(part) < n {
			last = nil
		}
		if err := m.forward(s, part, allLogits, out, last, obs); err != nil {
			return err
		}
	}
	return nil
}

// forward is one pass of Forward.
func (m *Model) forward(s *State, tokens []int, allLogits bool, logits []float32, read func(compute.Buf), obs Observer) error {
	h, b := m.H, m.b
	n := len(tokens)
	m.ensureScratch(s, n)
	sb := s.buf
	positions := make([]int, n)
	for i := range positions {
		positions[i] = s.pos + i
	}
	if err := b.Embed(sb.x, m.embd, tokens); err != nil {
		return err
	}
	hobs, _ := obs.(HiddenObserver)
	hidden := func(stage int, x compute.Buf, rows int) {
		if hobs != nil {
			v := make([]float32, rows*h.Hidden)
			b.Read(x, v)
			hobs.Hidden(stage, v)
		}
	}
	hidden(0, sb.x, n)
	routes := make([]*compute.Routes, h.Layers)
	for l, L := range m.layers {
		// Mixer: norm, attention or Gated DeltaNet into proj, add.
		b.RMSNorm(sb.xn, sb.x, L.attnNorm, n, h.Eps)
		if L.delta != nil {
			m.deltaNet(L.delta, s.rec.layers[L.delta.state], &sb, n)
		} else {
			m.attention(L.attn, s, positions, n)
		}
		// The residual add, and the MoE: norm, route (softmax then top k, or gpt-oss's top k
		// then softmax), run the chosen experts (and the shared one), add.
		m.addNorm(sb.x, sb.proj, sb.xn, L.ffnNorm, n)
		routes[l] = m.route(&L, sb.routerLogits, sb.xn, n)
		L.experts.MoE(sb.x, sb.xn, routes[l])
		if sh := L.shared; sh != nil {
			b.MatMul(sb.sharedLogits, sh.router, sb.xn, n)
			b.MoE(sb.x, sb.xn, sh.gate, sh.up, sh.down, nil, m.hy.SigmoidRoutes(sb.sharedLogits, n))
		}
		if err := errors.Join(b.Err(), L.experts.Err()); err != nil {
			return fmt.Errorf("model: layer %d: %w", l, err)
		}
		hidden(1+l, sb.x, n)
	}
	first := n - 1
	if allLogits {
		first = 0
	}
	rows := n - first
	b.Copy(sb.xn, 0, sb.x, first*h.Hidden, rows*h.Hidden)
	b.RMSNorm(sb.xn, sb.xn, m.outNorm, rows, h.Eps)
	hidden(h.Layers+1, sb.xn, rows)
	// The logits come out in chunks of the rows the buffer holds once ReserveScratch fixed
	// it (one): the plan counts that row, not rows x vocab (201k floats a row for gpt-oss),
	// so an all-logits pass stays inside the VRAM it planned for. Chunking here, rather
	// than a knob that makes the plan reserve every row, keeps the plan true for any caller
	// (eval today, logprobs or perplexity later) without taking VRAM from expert slots that
	// decode would use; the price is a matvec per row of the output weight, for evals only.
	chunk := rows
	if s.rowsSet {
		chunk = min(rows, max(s.rows, 1))
	}
	out := m.logitsBuf(s, chunk)
	for r := 0; r < rows; r += chunk {
		k := min(chunk, rows-r)
		x := sb.xn
		if r > 0 { // the chunk's normed rows to the start of a free buffer (proj is done)
			b.Copy(sb.proj, 0, sb.xn, r*h.Hidden, k*h.Hidden)
			x = sb.proj
		}
		b.MatMul(out, m.out, x, k)
		if read != nil && rows == 1 {
			read(out)
		} else {
			b.Read(out, logits[r*h.Vocab:(r+k)*h.Vocab])
		}
		if err := b.Err(); err != nil {
			return fmt.Errorf("model: output: %w", err)
		}
	}
	if obs != nil { // after the Read, every layer's routes are on the host
		for l, r := range routes {
			obs.Routes(l, *r)
		}
	}
	s.pos += n
	return nil
}

// attention is the attention block on the normed input xn, into proj: projections (+
// gpt-oss's biases), per-head q/k norm, RoPE (over part of each head in the hybrids, from
// gpt-oss's YaRN table), cache, attend (with gpt-oss's sinks and window), the hybrids'
// output gate, output projection (+ bias).
func (m *Model) attention(a *attention, s *State, positions []int, n int) {
	h, b, sb := m.H, m.b, &s.buf
	if a.gate != nil {
		b.MatMuls([]compute.Buf{sb.q, sb.gate, sb.k, sb.v}, []compute.Weight{a.q, a.gate, a.k, a.v}, sb.xn, n)
	} else if a.qBias != nil {
		m.matMulsBias([]compute.Buf{sb.q, sb.k, sb.v}, []compute.Weight{a.q, a.k, a.v}, []compute.Weight{a.qBias, a.kBias, a.vBias}, sb.xn, n)
	} else {
		b.MatMuls([]compute.Buf{sb.q, sb.k, sb.v}, []compute.Weight{a.q, a.k, a.v}, sb.xn, n)
	}
	// q/k norm (if any), RoPE and the KV store in one step where the backend has it.
	if fused, ok := b.(compute.NormRoPE); ok && a.qNorm != nil && m.rope == nil && h.RopeDims >= h.HeadDim {
		fused.NormRoPENeoXStore(sb.q, sb.k, sb.v, a.qNorm, a.kNorm, s.kv, a.kvLayer, s.pos, n, h.Heads, h.KVHeads, h.HeadDim, h.RopeBase, h.Eps)
	} else if fused, ok := b.(compute.RoPEStore); ok && a.qNorm == nil && m.rope != nil {
		fused.RoPEStore(sb.q, sb.k, sb.v, m.rope, s.kv, a.kvLayer, s.pos, n, h.Heads, h.KVHeads, h.HeadDim)
	} else {
		m.normRoPE(a, s, positions, n)
		b.StoreKV(s.kv, a.kvLayer, s.pos, n, sb.k, sb.v)
	}
	b.Attention(sb.att, sb.q, s.kv, compute.AttentionSpec{
		Layer: a.kvLayer, Pos0: s.pos, N: n, Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(h.HeadDim))), Sinks: a.sinks, Window: a.window,
	})
	if a.gate != nil {
		m.hy.MulSigmoid(sb.att, sb.gate, n*h.Heads*h.HeadDim)
	}
	if a.oBias != nil {
		m.matMulsBias([]compute.Buf{sb.proj}, []compute.Weight{a.o}, []compute.Weight{a.oBias}, sb.att, n)
	} else {
		b.MatMul(sb.proj, a.o, sb.att, n)
	}
}

// matMulsBias is MatMuls, then bias[i] added to each row of dst[i]: in the products' own
// launches where the backend folds them in (compute.BiasedMatMuls).
func (m *Model) matMulsBias(dst []compute.Buf, ws, bias []compute.Weight, x compute.Buf, n int) {
	if f, ok := m.b.(compute.BiasedMatMuls); ok {
		f.MatMulsBias(dst, ws, bias, x, n)
		return
	}
	m.b.MatMuls(dst, ws, x, n)
	for i, w := range bias {
		if w != nil {
			m.b.AddBias(dst[i], w, n)
		}
	}
}

// route is the MoE router on the normed rows xn: the logits (plus gpt-oss's bias) into
// logits, then softmax and top k, or gpt-oss's top k then softmax; one step where the
// backend has one (compute.Router).
func (m *Model) route(L *layer, logits, xn compute.Buf, n int) *compute.Routes {
	h, b := m.H, m.b
	if f, ok := b.(compute.Router); ok {
		if r := f.RouteRows(logits, xn, L.router, L.rBias, n, h.Experts, h.ExpertsUsed, h.RouteTopKFirst, h.NormTopK); r != nil {
			return r
		}
	}
	if L.rBias != nil {
		m.matMulsBias([]compute.Buf{logits}, []compute.Weight{L.router}, []compute.Weight{L.rBias}, xn, n)
	} else {
		b.MatMul(logits, L.router, xn, n)
	}
	if h.RouteTopKFirst {
		return b.RouteTopK(logits, n, h.Experts, h.ExpertsUsed)
	}
	return b.Route(logits, n, h.Experts, h.ExpertsUsed, h.NormTopK)
}

// addNorm adds add into the residual stream x and norms it into dst, in one step where the
// backend fuses the two (compute.AddNorm).
func (m *Model) addNorm(x, add, dst compute.Buf, w compute.Weight, n int) {
	if f, ok := m.b.(compute.AddNorm); ok {
		f.AddRMSNorm(x, add, dst, w, n, m.H.Eps)
		return
	}
	m.b.Add(x, add, n*m.H.Hidden)
	m.b.RMSNorm(dst, x, w, n, m.H.Eps)
}

// normRoPE is attention's per-head q/k norm (when the model has one) and RoPE, op by op.
func (m *Model) normRoPE(a *attention, s *State, positions []int, n int) {
	h, b, sb := m.H, m.b, &s.buf
	if a.qNorm != nil {
		b.RMSNorm(sb.q, sb.q, a.qNorm, n*h.Heads, h.Eps)
		b.RMSNorm(sb.k, sb.k, a.kNorm, n*h.KVHeads, h.Eps)
	}
	if m.rope != nil {
		b.RoPE(sb.q, n, h.Heads, h.HeadDim, positions, m.rope)
		b.RoPE(sb.k, n, h.KVHeads, h.HeadDim, positions, m.rope)
	} else if h.RopeDims < h.HeadDim {
		m.hy.RoPENeoXPartial(sb.q, n, h.Heads, h.HeadDim, h.RopeDims, positions, h.RopeBase)
		m.hy.RoPENeoXPartial(sb.k, n, h.KVHeads, h.HeadDim, h.RopeDims, positions, h.RopeBase)
	} else {
		b.RoPENeoX(sb.q, n, h.Heads, h.HeadDim, positions, h.RopeBase)
		b.RoPENeoX(sb.k, n, h.KVHeads, h.HeadDim, positions, h.RopeBase)
	}
}
