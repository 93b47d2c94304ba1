package gpu

import (
	"fmt"
	"math"

	"strata/cuda"
	"strata/engine/compute"
)

// Op codes of the rope ops (apart from the list in gpu.go).
const (
	opRopeTableStore uint64 = 1200 + iota
)

// ropeTable returns r's frequency table in VRAM (uploaded at the first use) and its scale;
// 0 when it does not fit heads of headDim values or the upload failed (recorded).
func (b *Backend) ropeTable(r *compute.Rope, headDim int) (cuda.DevicePtr, float32) {
	half := len(r.InvFreq)
	if half == 0 || 2*half > headDim {
		b.err.Set(fmt.Errorf("gpu: rope of %d frequencies over heads of %d values", half, headDim))
		return 0, 0
	}
	tab, ok := b.ropes[r]
	if !ok {
		b.step.brk()
		p, err := b.alloc(4*half, "rope frequencies")
		if err != nil {
			b.err.Set(err)
			return 0, 0
		}
		if err := cuda.Upload(b.s, p, r.InvFreq); err != nil {
			b.err.Set(fmt.Errorf("gpu: rope frequencies: %w", err))
			return 0, 0
		}
		if b.ropes == nil {
			b.ropes = map[*compute.Rope]cuda.DevicePtr{}
		}
		b.ropes[r], tab = p, p
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	return tab, scale
}

// RoPEStore is compute.RoPEStore: q's and k's rotation and the f16 cache store in one
// launch (an int8 cache takes RoPE, then StoreKV's own quantisation).
func (b *Backend) RoPEStore(q, k, v compute.Buf, r *compute.Rope, c compute.KV, layer, pos0, n, heads, kvHeads, headDim int) {
	kv := c.(*KV)
	if kv.int8 {
		positions := make([]int, n)
		for i := range positions {
			positions[i] = pos0 + i
		}
		b.RoPE(q, n, heads, headDim, positions, r)
		b.RoPE(k, n, kvHeads, headDim, positions, r)
		b.StoreKV(c, layer, pos0, n, k, v)
		return
	}
	tab, scale := b.ropeTable(r, headDim)
	if tab == 0 {
		return
	}
	half := len(r.InvFreq)
	pos := b.positions(nil, pos0, n)
	b.q8.drop()
	qp, kp := dev(q), dev(k)
	st := cuda.KVStore{V: dev(v), KCache: kv.k[layer], VCache: kv.v[layer], Ring: kv.ring[layer]}
	b.do(func() error {
		return b.k.RopeTableStore(b.s, qp, kp, pos, tab, n, heads, kvHeads, headDim, half, scale, st)
	}, opRopeTableStore, u(qp), u(kp), u(pos), u(tab), uint64(n), uint64(heads), uint64(kvHeads), uint64(headDim), uint64(half),
		uint64(math.Float32bits(scale)), u(st.V), u(st.KCache), u(st.VCache), uint64(st.Ring))
}
