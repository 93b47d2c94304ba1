package cpu

import (
	"math"

	"strata/engine/compute"
	"strata/engine/kv"
	"strata/engine/quant"
)

// Attention is causal grouped-query attention over the host cache; query head h reads kv
// head h / (heads/kvHeads). With the vector kernel each (token, kv head) pair is one task,
// else each (token, head) pair.
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
	if keys16 != nil && attendF16Fast(D) {
		// One task per (token, KV head): the query heads sharing a KV head read its rows once.
		b.pool.For(s.N*s.KVHeads, 1, func(lo, hi int) {
			scores := make([]float32, group*(s.Pos0+s.N))
			for idx := lo; idx < hi; idx++ {
				t, g := idx/s.KVHeads, idx%s.KVHeads
				heads := qs[(t*s.Heads+g*group)*D : (t*s.Heads+(g+1)*group)*D]
				dst := out[(t*s.Heads+g*group)*D : (t*s.Heads+(g+1)*group)*D]
				attendF16(heads, keys16[g*D:], vals16[g*D:], stride, s.Pos0+t+1, group, s.Scale, scores, dst)
			}
		})
		return
	}
	b.pool.For(s.N*s.Heads, 1, func(lo, hi int) {
		scores := make([]float32, s.Pos0+s.N)
		acc := make([]float32, D)
		row := make([]float32, D)
		for idx := lo; idx < hi; idx++ {
			t, h := idx/s.Heads, idx%s.Heads
			off := (h / group) * D
			qv := qs[(t*s.Heads+h)*D : (t*s.Heads+h+1)*D]
			last := s.Pos0 + t
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
