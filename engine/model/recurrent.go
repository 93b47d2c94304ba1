package model

import "strata/engine/compute"

// maxCheckpoints bounds the recurrent-state copies a sequence keeps. Each holds every Gated
// DeltaNet layer's state (qwen3next-80b-a3b: 36 layers x 32 heads x 128 x 128 floats, 75 MB).
const maxCheckpoints = 4

// RecurrentState is the number of Gated DeltaNet layers and the bytes of one sequence's
// recurrent state, its checkpoints included (float32 on every backend).
func (h Hparams) RecurrentState() (layers int, bytes int64) {
	for _, r := range h.Recurrent {
		if r {
			layers++
		}
	}
	s := h.SSM
	per := int64((s.ConvKernel-1)*(2*s.KHeads*s.KDim+s.VHeads*s.VDim) + s.VHeads*s.KDim*s.VDim)
	return layers, 4 * per * int64(layers) * (1 + maxCheckpoints)
}

// recurrent is one sequence's Gated DeltaNet state: per layer the conv's last K-1 input rows
// and the delta rule's S.
//
// DESIGN: the engine reuses a session's cache by prefix (a new turn, a regenerated reply, an
// edited last message keep what they share with the last prompt). A KV cache truncates to any
// prefix; a recurrent state has folded every token in and cannot. So the state keeps
// checkpoints: copies of itself at positions the engine marks (Checkpoint), the latest
// maxCheckpoints of them. Rewind goes back to the latest checkpoint at or before the shared
// prefix (or to the empty state at 0) and the engine re-reads the tokens after it. The engine
// marks the position just before a prompt's last token and the end of each reply, so a
// regenerate re-reads one token, the next turn only its new tokens, an edited last message
// that message, and a new chat everything (as a fresh run would). The alternative, re-reading
// the whole conversation on every rewind, costs a prefill of the history per regenerate.
type recurrent struct {
	b           compute.Backend
	layers      []layerState
	checkpoints []checkpoint // ascending positions
	// spare holds the copies of dropped checkpoints for the next ones: backend buffers
	// are freed only with the backend, so a state allocates at most maxCheckpoints copies
	// over its life (a plan counts that many) however often it rewinds.
	spare [][]layerState
}

type layerState struct{ conv, ssm compute.Buf }

type checkpoint struct {
	pos    int
	layers []layerState
}

// newRecurrent allocates a zero state for the model's Gated DeltaNet layers.
func (m *Model) newRecurrent() recurrent {
	r := recurrent{b: m.b}
	for range m.deltaLayers {
		r.layers = append(r.layers, m.newLayerState())
	}
	return r
}

func (m *Model) newLayerState() layerState {
	s := m.H.SSM
	channels := 2*s.KHeads*s.KDim + s.VHeads*s.VDim
	return layerState{conv: m.b.NewBuf((s.ConvKernel - 1) * channels), ssm: m.b.NewBuf(s.VHeads * s.KDim * s.VDim)}
}

// rewind restores the latest checkpoint at or before pos, or the empty state, and returns
// its position; a state without recurrent layers keeps pos itself.
func (r *recurrent) rewind(pos int) int {
	if len(r.layers) == 0 {
		return pos
	}
	for i := len(r.checkpoints) - 1; i >= 0; i-- {
		c := r.checkpoints[i]
		if c.pos <= pos {
			copyStates(r.b, r.layers, c.layers)
			r.dropFrom(i + 1)
			return c.pos
		}
	}
	r.dropFrom(0)
	for _, l := range r.layers {
		r.b.Write(l.conv, make([]float32, l.conv.Len()))
		r.b.Write(l.ssm, make([]float32, l.ssm.Len()))
	}
	return 0
}

// checkpoint copies the state at pos (which must be past every kept checkpoint or equal to
// the last), dropping the oldest copy when maxCheckpoints are kept.
func (r *recurrent) checkpoint(pos int) {
	if len(r.layers) == 0 || pos == 0 {
		return
	}
	for len(r.checkpoints) > 0 && r.checkpoints[len(r.checkpoints)-1].pos > pos {
		r.dropFrom(len(r.checkpoints) - 1) // not on this sequence's path
	}
	var c checkpoint
	switch n := len(r.checkpoints); {
	case n > 0 && r.checkpoints[n-1].pos == pos:
		return // the state there is already kept
	case n == maxCheckpoints:
		c = r.checkpoints[0]
		r.checkpoints = append(r.checkpoints[:0], r.checkpoints[1:]...)
	case len(r.spare) > 0:
		c.layers = r.spare[len(r.spare)-1]
		r.spare = r.spare[:len(r.spare)-1]
	default:
		for _, l := range r.layers {
			c.layers = append(c.layers, layerState{conv: r.b.NewBuf(l.conv.Len()), ssm: r.b.NewBuf(l.ssm.Len())})
		}
	}
	c.pos = pos
	copyStates(r.b, c.layers, r.layers)
	r.checkpoints = append(r.checkpoints, c)
}

// dropFrom forgets the checkpoints from index i on, keeping their copies as spares.
func (r *recurrent) dropFrom(i int) {
	for _, c := range r.checkpoints[i:] {
		r.spare = append(r.spare, c.layers)
	}
	r.checkpoints = r.checkpoints[:i]
}

func copyStates(b compute.Backend, dst, src []layerState) {
	for i := range src {
		b.Copy(dst[i].conv, 0, src[i].conv, 0, src[i].conv.Len())
		b.Copy(dst[i].ssm, 0, src[i].ssm, 0, src[i].ssm.Len())
	}
}
