package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"strata/engine/compute"
	"strata/engine/kv"
)

// BenchmarkAttentionDecode is one decode step's attention over every layer of a
// 30b-a3b-shaped float16 cache (48 layers, 32 query heads on 4 KV heads of 128): the cache
// (59 MB at 600 positions) is read from memory, as it is between a step's weight reads.
func BenchmarkAttentionDecode(b *testing.B) {
	const layers, heads, kvHeads, dim = 48, 32, 4, 128
	be := New(Options{Threads: runtime.NumCPU()})
	b.Cleanup(func() { be.Close() })
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ctx := range []int{64, 600, 2048} {
		b.Run(fmt.Sprintf("ctx=%d", ctx), func(b *testing.B) {
			cache, err := kv.New(layers, kvHeads, dim, ctx+1, kv.F16)
			if err != nil {
				b.Fatal(err)
			}
			rows := make([]float32, ctx*kvHeads*dim)
			for i := range rows {
				rows[i] = float32(rng.NormFloat64())
			}
			for l := range layers {
				cache.Store(l, 0, ctx, rows, rows)
			}
			q, out := be.NewBuf(heads*dim), be.NewBuf(heads*dim)
			be.Write(q, rows[:heads*dim])
			for b.Loop() {
				for l := range layers {
					be.Attention(out, q, cache, compute.AttentionSpec{
						Layer: l, Pos0: ctx - 1, N: 1, Heads: heads, KVHeads: kvHeads, HeadDim: dim, Scale: float32(1 / math.Sqrt(dim)),
					})
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/token")
		})
	}
}

// BenchmarkAttentionPrefill is a 512-token prefill's attention over every layer of the same
// cache shape, from an empty cache.
func BenchmarkAttentionPrefill(b *testing.B) {
	const layers, heads, kvHeads, dim, n = 48, 32, 4, 128, 512
	be := New(Options{Threads: runtime.NumCPU()})
	b.Cleanup(func() { be.Close() })
	rng := rand.New(rand.NewPCG(7, 8))
	cache, err := kv.New(layers, kvHeads, dim, n, kv.F16)
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]float32, n*heads*dim)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	for l := range layers {
		cache.Store(l, 0, n, rows, rows)
	}
	q, out := be.NewBuf(n*heads*dim), be.NewBuf(n*heads*dim)
	be.Write(q, rows)
	for b.Loop() {
		for l := range layers {
			be.Attention(out, q, cache, compute.AttentionSpec{
				Layer: l, Pos0: 0, N: n, Heads: heads, KVHeads: kvHeads, HeadDim: dim, Scale: float32(1 / math.Sqrt(dim)),
			})
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/prompt")
}
