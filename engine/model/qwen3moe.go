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

// layer holds one transformer block's weights on the backend.
type layer struct {
	attnNorm, q, k, v, o, qNorm, kNorm compute.Weight
	ffnNorm, router                    compute.Weight
	experts                            compute.Experts
}

// Model is a loaded qwen3moe: hyper-parameters and weights placed on one backend.
type Model struct {
	H       Hparams
	b       compute.Backend
	embd    compute.Weight
	outNorm compute.Weight
	out     compute.Weight
	layers  []layer
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

// LoadWith is Load with the layers' experts handed to placeExperts.
func LoadWith(f *gguf.File, b compute.Backend, progress func(done, total int64), placeExperts ExpertPlacer) (*Model, error) {
	h, err := ReadHparams(f)
	if err != nil {
		return nil, err
	}
	m := &Model{H: h, b: b}
	qDim, kvDim := h.Heads*h.HeadDim, h.KVHeads*h.HeadDim
	var total, done int64
	for _, t := range f.Tensors {
		total += t.Size
	}
	spec := func(name string, rows, cols, experts int) (compute.WeightSpec, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return compute.WeightSpec{}, fmt.Errorf("model: %s: tensor %q is missing", f.Path, name)
		}
		want := []int64{int64(cols), int64(rows)}
		if experts > 1 {
			want = append(want, int64(experts))
		}
		if rows == 1 && experts <= 1 {
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
	placed := func(bytes int) {
		done += int64(bytes)
		if progress != nil {
			progress(done, total)
		}
	}
	place := func(name string, rows, cols, experts int) (compute.Weight, error) {
		s, err := spec(name, rows, cols, experts)
		if err != nil {
			return nil, err
		}
		w, err := b.Place(s)
		if err != nil {
			return nil, fmt.Errorf("model: %s: %w", f.Path, err)
		}
		placed(len(s.Data))
		return w, nil
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
	if m.embd, err = place("token_embd.weight", h.Vocab, h.Hidden, 1); err != nil {
		return nil, err
	}
	for l := range h.Layers {
		var L layer
		p := func(dst *compute.Weight, suffix string, rows, cols, experts int) {
			if err == nil {
				*dst, err = place(fmt.Sprintf("blk.%d.%s.weight", l, suffix), rows, cols, experts)
			}
		}
		p(&L.attnNorm, "attn_norm", 1, h.Hidden, 1)
		p(&L.q, "attn_q", qDim, h.Hidden, 1)
		p(&L.k, "attn_k", kvDim, h.Hidden, 1)
		p(&L.v, "attn_v", kvDim, h.Hidden, 1)
		p(&L.o, "attn_output", h.Hidden, qDim, 1)
		p(&L.qNorm, "attn_q_norm", 1, h.HeadDim, 1)
		p(&L.kNorm, "attn_k_norm", 1, h.HeadDim, 1)
		p(&L.ffnNorm, "ffn_norm", 1, h.Hidden, 1)
		p(&L.router, "ffn_gate_inp", h.Experts, h.Hidden, 1)
		if err != nil {
			return nil, err
		}
		names := ExpertTensors(l)
		var g, u, d compute.WeightSpec
		if g, err = spec(names[0], h.ExpertFFN, h.Hidden, h.Experts); err != nil {
			return nil, err
		}
		if u, err = spec(names[1], h.ExpertFFN, h.Hidden, h.Experts); err != nil {
			return nil, err
		}
		if d, err = spec(names[2], h.Hidden, h.ExpertFFN, h.Experts); err != nil {
			return nil, err
		}
		if L.experts, err = placeExperts(l, g, u, d); err != nil {
			return nil, fmt.Errorf("model: %s: layer %d experts: %w", f.Path, l, err)
		}
		placed(len(g.Data) + len(u.Data) + len(d.Data))
		m.layers = append(m.layers, L)
	}
	if m.outNorm, err = place("output_norm.weight", 1, h.Hidden, 1); err != nil {
		return nil, err
	}
	outName := "output.weight"
	if _, ok := f.Tensor(outName); !ok {
		outName = "token_embd.weight" // tied embeddings
	}
	if m.out, err = place(outName, h.Vocab, h.Hidden, 1); err != nil {
		return nil, err
	}
	return m, nil
}

// Observer receives intermediate results of a forward pass (for the expert profile, the tier
// map's hit counts and tests). Any method may be a no-op.
type Observer interface {
	Routes(layer int, r compute.Routes)
}

// State is one sequence's KV cache and scratch space.
type State struct {
	kv     compute.KV
	pos    int // tokens in the cache
	buf    scratch
	n      int // tokens the scratch is sized for
	logits compute.Buf
	rows   int // logit rows the logits buffer holds
}

type scratch struct {
	x, xn, q, k, v, att, proj, routerLogits compute.Buf
}

// NewState allocates a KV cache of ctx positions.
func (m *Model) NewState(ctx int, kvType string) (*State, error) {
	kv, err := m.b.NewKV(compute.KVSpec{Layers: m.H.Layers, KVHeads: m.H.KVHeads, HeadDim: m.H.HeadDim, Positions: ctx, Type: kvType})
	if err != nil {
		return nil, err
	}
	return &State{kv: kv}, nil
}

// Pos is the number of tokens in the cache.
func (s *State) Pos() int { return s.pos }

// Capacity is the cache size in tokens.
func (s *State) Capacity() int { return s.kv.Capacity() }

// Rewind forgets the cache beyond pos tokens (to reuse a shared prefix).
func (s *State) Rewind(pos int) {
	if pos < s.pos {
		s.pos = max(pos, 0)
	}
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
	s.n = n
}

// logitsBuf holds rows x vocab logits; most steps need one row, so it grows only for evals.
func (m *Model) logitsBuf(s *State, rows int) compute.Buf {
	if s.rows < rows {
		s.logits, s.rows = m.b.NewBuf(rows*m.H.Vocab), rows
	}
	return s.logits
}

// Forward runs tokens through the model at the state's next positions and appends them to
// its cache. It writes the logits of the last token to logits (len Vocab), or of every token
// when allLogits is set (len n*Vocab).
func (m *Model) Forward(s *State, tokens []int, allLogits bool, logits []float32, obs Observer) error {
	h, b := m.H, m.b
	n := len(tokens)
	if n == 0 {
		return fmt.Errorf("model: forward of no tokens")
	}
	if s.pos+n > s.kv.Capacity() {
		return fmt.Errorf("model: %d tokens do not fit: %d of %d context positions are used", n, s.pos, s.kv.Capacity())
	}
	for _, t := range tokens {
		if t < 0 || t >= h.Vocab {
			return fmt.Errorf("model: token id %d is outside the vocabulary of %d", t, h.Vocab)
		}
	}
	m.ensureScratch(s, n)
	sb := s.buf
	positions := make([]int, n)
	for i := range positions {
		positions[i] = s.pos + i
	}
	if err := b.Embed(sb.x, m.embd, tokens); err != nil {
		return err
	}
	routes := make([]*compute.Routes, h.Layers)
	for l, L := range m.layers {
		// Attention: norm, projections, per-head q/k norm, RoPE, cache, attend, project, add.
		b.RMSNorm(sb.xn, sb.x, L.attnNorm, n, h.Eps)
		b.MatMuls([]compute.Buf{sb.q, sb.k, sb.v}, []compute.Weight{L.q, L.k, L.v}, sb.xn, n)
		b.RMSNorm(sb.q, sb.q, L.qNorm, n*h.Heads, h.Eps)
		b.RMSNorm(sb.k, sb.k, L.kNorm, n*h.KVHeads, h.Eps)
		b.RoPENeoX(sb.q, n, h.Heads, h.HeadDim, positions, h.RopeBase)
		b.RoPENeoX(sb.k, n, h.KVHeads, h.HeadDim, positions, h.RopeBase)
		b.StoreKV(s.kv, l, s.pos, n, sb.k, sb.v)
		b.Attention(sb.att, sb.q, s.kv, compute.AttentionSpec{
			Layer: l, Pos0: s.pos, N: n, Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim,
			Scale: float32(1 / math.Sqrt(float64(h.HeadDim))),
		})
		b.MatMul(sb.proj, L.o, sb.att, n)
		b.Add(sb.x, sb.proj, n*h.Hidden)

		// MoE: norm, route (softmax, top k), run the chosen experts, add.
		b.RMSNorm(sb.xn, sb.x, L.ffnNorm, n, h.Eps)
		b.MatMul(sb.routerLogits, L.router, sb.xn, n)
		routes[l] = b.Route(sb.routerLogits, n, h.Experts, h.ExpertsUsed, h.NormTopK)
		L.experts.MoE(sb.x, sb.xn, routes[l])
		if err := errors.Join(b.Err(), L.experts.Err()); err != nil {
			return fmt.Errorf("model: layer %d: %w", l, err)
		}
	}
	first := n - 1
	if allLogits {
		first = 0
	}
	rows := n - first
	b.Copy(sb.xn, 0, sb.x, first*h.Hidden, rows*h.Hidden)
	b.RMSNorm(sb.xn, sb.xn, m.outNorm, rows, h.Eps)
	out := m.logitsBuf(s, rows)
	b.MatMul(out, m.out, sb.xn, rows)
	b.Read(out, logits[:rows*h.Vocab])
	if err := b.Err(); err != nil {
		return fmt.Errorf("model: output: %w", err)
	}
	if obs != nil { // after the Read, every layer's routes are on the host
		for l, r := range routes {
			obs.Routes(l, *r)
		}
	}
	s.pos += n
	return nil
}
