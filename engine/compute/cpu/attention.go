package cpu

import (
	"math"

	"strata/engine/compute"
	"strata/engine/kv"
	"strata/engine/quant"
)

// Attention is causal grouped-query attention over the host cache: each (token, head) pair
// is one task; query head h reads kv head h / (heads/kvHeads).
func (b *Backend) Attention(dst, q compute.Buf, c compute.KV, s compute.AttentionSpec) {
	cache := c.(*kv.Cache)
	out, qs := f32(dst), f32(q)
	D, group := s.HeadDim, s.Heads/s.KVHeads
	stride := s.KVHeads * D
	var keys32, vals32 []float32
	var keys16, vals16 []uint16
	if cache.Type() == kv.F32 {
		keys32, vals32 = cache.Keys32(s.Layer), cache.Values32(s.Layer)
	} else {
		keys16, vals16 = cache.Keys16(s.Layer), cache.Values16(s.Layer)
	}
	fast := keys16 != nil && attendF16Fast(D)
	b.pool.For(s.N*s.Heads, 1, func(lo, hi int) {
		scores := make([]float32, s.Pos0+s.N)
		acc := make([]float32, D)
		row := make([]float32, D)
		for idx := lo; idx < hi; idx++ {
			t, h := idx/s.Heads, idx%s.Heads
			off := (h / group) * D
			qv := qs[(t*s.Heads+h)*D : (t*s.Heads+h+1)*D]
			last := s.Pos0 + t
			if fast {
				attendF16(qv, keys16[off:], vals16[off:], stride, last+1, s.Scale, scores, out[(t*s.Heads+h)*D:(t*s.Heads+h+1)*D])
				continue
			}
			maxv := float32(math.Inf(-1))
			for p := 0; p <= last; p++ {
				var dot float32
				if keys32 != nil {
					k := keys32[p*stride+off : p*stride+off+D]
					for i, x := range qv {
						dot += x * k[i]
					}
				} else {
					k := keys16[p*stride+off : p*stride+off+D]
					for i, x := range qv {
						dot += x * quant.FP16ToFP32(k[i])
					}
				}
				dot *= s.Scale
				scores[p] = dot
				maxv = max(maxv, dot)
			}
			var sum float32
			for p := 0; p <= last; p++ {
				e := float32(math.Exp(float64(scores[p] - maxv)))
				scores[p] = e
				sum += e
			}
			clear(acc)
			for p := 0; p <= last; p++ {
				w := scores[p] / sum
				if vals32 != nil {
					v := vals32[p*stride+off : p*stride+off+D]
					for i := range acc {
						acc[i] += w * v[i]
					}
				} else {
					v := vals16[p*stride+off : p*stride+off+D]
					for i := range row {
						row[i] = quant.FP16ToFP32(v[i])
					}
					for i := range acc {
						acc[i] += w * row[i]
					}
				}
			}
			copy(out[(t*s.Heads+h)*D:(t*s.Heads+h+1)*D], acc)
		}
	})
}
