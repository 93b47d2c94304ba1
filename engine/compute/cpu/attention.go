package cpu

import (
	"math"

	"strata/engine/compute"
	"strata/engine/kv"
	"strata/engine/quant"
)

// Attention is causal grouped-query attention over the host cache; query head h reads kv
// head h / (heads/kvHeads). With the vector kernel (float16 or int8 caches) a task is the heads of one kv head for
// up to attendTokens tokens (or, when threads would idle, a part of one token's positions:
// attendInParts); with sinks, a window or a ring layer, one (token, KV head) per task
// (attendRuns); without the kernel, one (token, head) pair.
func (b *Backend) Attention(dst, q compute.Buf, c compute.KV, s compute.AttentionSpec) {
	cache := c.(*kv.Cache)
	out, qs := f32(dst), f32(q)
	D, group := s.HeadDim, s.Heads/s.KVHeads
	stride := D // a KV head's positions follow one another (see kv.Cache)
	plain := s.Sinks == nil && s.Window == 0 && cache.Kept(s.Layer) == cache.Capacity()
	rows, fast := vectorRows(cache, s.Layer, D)
	if fast && plain {
		if parts := attentionParts(s.N*s.KVHeads, s.Pos0+s.N, b.pool.Size()); parts > 1 {
			b.attendInParts(out, qs, cache, rows, s, parts)
			return
		}
		// One task per (block of tokens, KV head): the query heads sharing a KV head, of
		// attendTokens tokens, read its rows once.
		blocks := (s.N + attendTokens - 1) / attendTokens
		tokenStride := s.Heads * D
		b.pool.For(blocks*s.KVHeads, 1, func(lo, hi int) {
			// Reused blocks: a long prefill would otherwise allocate megabytes per layer.
			sc := b.scratch(attendTokens * group * (s.Pos0 + s.N))
			defer b.release(sc)
			scores := *sc
			for idx := lo; idx < hi; idx++ {
				blk, g := idx/s.KVHeads, idx%s.KVHeads
				t0 := blk * attendTokens
				tn := min(attendTokens, s.N-t0)
				at := t0*tokenStride + g*group*D
				kv0 := cache.HeadOffset(s.Layer, g)
				rows.attend(qs[at:], tokenStride, kv0, stride, s.Pos0+t0+1, tn, group, D, s.Scale, scores, out[at:], nil)
			}
		})
		return
	}
	if fast {
		b.attendRuns(out, qs, cache, rows, s)
		return
	}
	b.attendGeneric(out, qs, cache, s)
}

// cacheRows is one layer's storage as the vector kernel reads it: float16, or int8 values
// with a float32 scale per kv.Int8Block.
type cacheRows struct {
	k16, v16 []uint16
	k8, v8   []int8
	ks, vs   []float32
}

// vectorRows is the layer's storage and whether the vector kernel reads it here: a float16
// cache, or an int8 one of whole 32-value blocks, with heads of d dims the kernel takes.
func vectorRows(c *kv.Cache, layer, d int) (cacheRows, bool) {
	switch {
	case c.Type() == kv.F16 && attendF16Fast(d):
		return cacheRows{k16: c.Keys16(layer), v16: c.Values16(layer)}, true
	case c.Type() == kv.Int8 && c.Block() == kv.Int8Block && attendF16Fast(d):
		return cacheRows{k8: c.Keys8(layer), v8: c.Values8(layer), ks: c.KeyScales(layer), vs: c.ValueScales(layer)}, true
	}
	return cacheRows{}, false
}

// attend runs the vector kernel (see attendF16) over the rows from value offset off (a
// multiple of the head size, so of the int8 block).
func (r cacheRows) attend(q []float32, qs, off, stride, n, t, g, d int, scale float32, scores, out, ml []float32) {
	if r.k8 != nil {
		blk := off / kv.Int8Block
		attendQ8(q, qs, r.k8[off:], r.v8[off:], r.ks[blk:], r.vs[blk:], stride, n, t, g, d, scale, scores, out, ml)
		return
	}
	attendF16(q, qs, r.k16[off:], r.v16[off:], stride, n, t, g, d, scale, scores, out, ml)
}

// attendRuns is the vector kernel's attention with sinks, a window or a ring layer: a task is
// one (token, KV head); the positions it sees are at most two runs of consecutive slots (a
// ring wraps once), each attended as a part (unnormalised sums, max score, weight sum) and
// merged with the head's sink, which joins the denominator only.
func (b *Backend) attendRuns(out, qs []float32, cache *kv.Cache, rows cacheRows, s compute.AttentionSpec) {
	D, group := s.HeadDim, s.Heads/s.KVHeads
	kept := cache.Kept(s.Layer)
	var sinks []float32
	if s.Sinks != nil {
		sinks = s.Sinks.(*Weight).vec
	}
	width := group * D
	span := s.Pos0 + s.N // the most positions a token sees
	if s.Window > 0 {
		span = min(span, s.Window)
	}
	b.pool.For(s.N*s.KVHeads, 1, func(lo, hi int) {
		sc := b.scratch(group*span + 2*(width+2*group))
		defer b.release(sc)
		scores := (*sc)[:group*span]
		rest := (*sc)[group*span:]
		parts := [2][]float32{rest[:width], rest[width : 2*width]}
		mls := [2][]float32{rest[2*width : 2*width+2*group], rest[2*width+2*group : 2*width+4*group]}
		for idx := lo; idx < hi; idx++ {
			t, g := idx/s.KVHeads, idx%s.KVHeads
			last := s.Pos0 + t
			first := 0
			if s.Window > 0 {
				first = max(0, last-s.Window+1)
			}
			n, slot := last-first+1, cache.Slot(s.Layer, first)
			runs := [2][2]int{{slot, min(n, kept-slot)}, {0, n - min(n, kept-slot)}}
			heads := qs[(t*s.Heads+g*group)*D : (t*s.Heads+(g+1)*group)*D]
			off := cache.HeadOffset(s.Layer, g)
			used := 0
			for r, run := range runs {
				if run[1] == 0 {
					continue
				}
				at := off + run[0]*D
				rows.attend(heads, width, at, D, run[1], 1, group, D, s.Scale, scores, parts[r], mls[r])
				used = r + 1
			}
			for h := range group {
				maxv := math.Inf(-1)
				for r := range used {
					maxv = max(maxv, float64(mls[r][2*h]))
				}
				if sinks != nil {
					maxv = max(maxv, float64(sinks[g*group+h]))
				}
				var sum float64
				var coef [2]float64
				for r := range used {
					if mls[r][2*h+1] > 0 {
						coef[r] = math.Exp(float64(mls[r][2*h]) - maxv)
						sum += coef[r] * float64(mls[r][2*h+1])
					}
				}
				if sinks != nil {
					sum += math.Exp(float64(sinks[g*group+h]) - maxv)
				}
				dst := out[(t*s.Heads+g*group+h)*D : (t*s.Heads+g*group+h+1)*D]
				for i := range dst {
					var acc float64
					for r := range used {
						acc += coef[r] * float64(parts[r][h*D+i])
					}
					dst[i] = float32(acc / sum)
				}
			}
		}
	})
}

// attendGeneric is the plain loop, one (token, head) pair per task, over any cache type,
// with sinks, windows and ring layers (see kv.Cache.Slot): the reference, and the path of a
// float32 cache, an int8 one (read in place, a block's sum scaled once) or a CPU without the
// vector kernel.
func (b *Backend) attendGeneric(out, qs []float32, cache *kv.Cache, s compute.AttentionSpec) {
	D, group := s.HeadDim, s.Heads/s.KVHeads
	var keys32, vals32 []float32
	var keys16, vals16 []uint16
	var keys8, vals8 []int8
	var kScale, vScale []float32
	blk := cache.Block()
	switch cache.Type() {
	case kv.F32:
		keys32, vals32 = cache.Keys32(s.Layer), cache.Values32(s.Layer)
	case kv.Int8:
		keys8, vals8 = cache.Keys8(s.Layer), cache.Values8(s.Layer)
		kScale, vScale = cache.KeyScales(s.Layer), cache.ValueScales(s.Layer)
	default:
		keys16, vals16 = cache.Keys16(s.Layer), cache.Values16(s.Layer)
	}
	var sinks []float32
	if s.Sinks != nil {
		sinks = s.Sinks.(*Weight).vec
	}
	b.pool.For(s.N*s.Heads, 1, func(lo, hi int) {
		scores := make([]float32, s.Pos0+s.N)
		acc := make([]float32, D)
		row := make([]float32, D)
		for idx := lo; idx < hi; idx++ {
			t, h := idx/s.Heads, idx%s.Heads
			off := cache.HeadOffset(s.Layer, h/group)
			qv := qs[(t*s.Heads+h)*D : (t*s.Heads+h+1)*D]
			last := s.Pos0 + t
			first := 0
			if s.Window > 0 {
				first = max(0, last-s.Window+1)
			}
			maxv := float32(math.Inf(-1))
			for p := first; p <= last; p++ {
				at := off + cache.Slot(s.Layer, p)*D
				var dot float32
				switch {
				case keys32 != nil:
					k := keys32[at : at+D]
					for i, x := range qv {
						dot += x * k[i]
					}
				case keys8 != nil:
					// Each block's sum in the int8 units, scaled once: the values are read as
					// stored, with no float copy of the row.
					for b0 := 0; b0 < D; b0 += blk {
						k := keys8[at+b0 : at+b0+blk]
						var part float32
						for i, x := range qv[b0 : b0+blk] {
							part += x * float32(k[i])
						}
						dot += part * kScale[(at+b0)/blk]
					}
				default:
					k := keys16[at : at+D]
					for i, x := range qv {
						dot += x * quant.FP16ToFP32(k[i])
					}
				}
				dot *= s.Scale
				scores[p] = dot
				maxv = max(maxv, dot)
			}
			if sinks != nil {
				maxv = max(maxv, sinks[h])
			}
			var sum float32
			for p := first; p <= last; p++ {
				e := float32(math.Exp(float64(scores[p] - maxv)))
				scores[p] = e
				sum += e
			}
			if sinks != nil {
				sum += float32(math.Exp(float64(sinks[h] - maxv)))
			}
			clear(acc)
			for p := first; p <= last; p++ {
				w := scores[p] / sum
				at := off + cache.Slot(s.Layer, p)*D
				switch {
				case vals32 != nil:
					v := vals32[at : at+D]
					for i := range acc {
						acc[i] += w * v[i]
					}
				case vals8 != nil:
					for b0 := 0; b0 < D; b0 += blk {
						v, ws := vals8[at+b0:at+b0+blk], w*vScale[(at+b0)/blk]
						for i, x := range v {
							acc[b0+i] += ws * float32(x)
						}
					}
				default:
					v := vals16[at : at+D]
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

// attendTokens is how many consecutive tokens of a prefill share one pass over a KV head's
// rows (each token still gets the operations it would get alone).
const attendTokens = 4

// minPartPositions is the fewest cached positions worth a task of their own: below it the
// hand-off and the merge cost more than the attention.
const minPartPositions = 128

// attentionParts is how many parts to cut each (token, KV head) task's positions into: one
// when there are tasks for every thread; else enough for the threads (decode has as many
// tasks as KV heads, four for Qwen3-30B-A3B), each part at least minPartPositions long.
// It depends only on the shapes and the pool, so results repeat run to run.
func attentionParts(tasks, positions, threads int) int {
	if tasks >= threads {
		return 1
	}
	return max(1, min((threads+tasks-1)/tasks, positions/minPartPositions))
}

// attendInParts is the vector kernel's attention with each task's positions cut into parts
// run in parallel, each giving its unnormalised sums, max score and weight sum; the parts
// are then merged per head (flash-decoding).
func (b *Backend) attendInParts(out, qs []float32, cache *kv.Cache, rows cacheRows, s compute.AttentionSpec, parts int) {
	D, group := s.HeadDim, s.Heads/s.KVHeads
	stride := D
	tasks := s.N * s.KVHeads
	width := group * D
	// Every value below is written before it is read (an empty part writes only its ml).
	sp := b.scratch(tasks * parts * (width + group*2))
	defer b.release(sp)
	partial, ml := (*sp)[:tasks*parts*width], (*sp)[tasks*parts*width:]
	span := func(t, part int) (int, int) {
		n := s.Pos0 + t + 1
		size := (n + parts - 1) / parts
		return min(part*size, n), min((part+1)*size, n)
	}
	b.pool.For(tasks*parts, 1, func(lo, hi int) {
		sc := b.scratch(group * ((s.Pos0 + s.N + parts - 1) / parts))
		defer b.release(sc)
		scores := *sc
		for idx := lo; idx < hi; idx++ {
			task, part := idx/parts, idx%parts
			t, g := task/s.KVHeads, task%s.KVHeads
			p0, p1 := span(t, part)
			o, m := partial[idx*width:(idx+1)*width], ml[idx*group*2:(idx+1)*group*2]
			if p0 == p1 {
				for h := range group {
					m[2*h], m[2*h+1] = float32(math.Inf(-1)), 0
				}
				continue
			}
			heads := qs[(t*s.Heads+g*group)*D : (t*s.Heads+(g+1)*group)*D]
			off := cache.HeadOffset(s.Layer, g) + p0*stride
			rows.attend(heads, width, off, stride, p1-p0, 1, group, D, s.Scale, scores, o, m)
		}
	})
	// The merge, one (task, head) pair at a time, in parallel: left to the caller alone, the
	// other threads waited on it (BenchmarkAttentionDecode on the H200's 16 threads at 600
	// positions: 5.5-6.0 -> 2.5-2.8 ms, at 2048: 10.3-11.3 -> 6.7-7.3).
	b.pool.For(tasks*group, 1, func(lo, hi int) {
		coef := make([]float64, parts)
		for th := lo; th < hi; th++ {
			task, h := th/group, th%group
			t, g := task/s.KVHeads, task%s.KVHeads
			maxv := math.Inf(-1)
			for part := range parts {
				maxv = max(maxv, float64(ml[((task*parts+part)*group+h)*2]))
			}
			var sum float64
			clear(coef)
			for part := range parts {
				i := ((task*parts+part)*group + h) * 2
				if ml[i+1] > 0 {
					coef[part] = math.Exp(float64(ml[i]) - maxv)
					sum += coef[part] * float64(ml[i+1])
				}
			}
			dst := out[(t*s.Heads+g*group+h)*D : (t*s.Heads+g*group+h+1)*D]
			for i := range dst {
				var acc float64
				for part := range parts {
					if coef[part] != 0 {
						acc += coef[part] * float64(partial[(task*parts+part)*width+h*D+i])
					}
				}
				dst[i] = float32(acc / sum)
			}
		}
	})
}
