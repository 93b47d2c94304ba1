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

// The benchmarks' cache: 30b-a3b's attention shape (48 layers, 32 query heads on 4 KV heads
// of 128), in float16 unless a benchmark asks for int8.
const benchLayers, benchHeads, benchKVHeads, benchDim = 48, 32, 4, 128

// benchAttention makes a backend on every core and a cache of positions positions whose
// first n hold random keys and values in every layer. rows is random too, long enough for
// n tokens' queries.
func benchAttention(b *testing.B, seed uint64, positions, n int, typ kv.Type) (be *Backend, cache *kv.Cache, rows []float32) {
	be = New(Options{Threads: runtime.NumCPU()})
	b.Cleanup(func() { be.Close() })
	cache, err := kv.New(benchLayers, benchKVHeads, benchDim, positions, typ)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	rows = make([]float32, n*benchHeads*benchDim)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	for l := range benchLayers {
		cache.Store(l, 0, n, rows, rows)
	}
	return be, cache, rows
}

// attendLayers runs one step's attention (n tokens from pos0) in every layer.
func attendLayers(be *Backend, out, q compute.Buf, cache *kv.Cache, pos0, n int) {
	for l := range benchLayers {
		be.Attention(out, q, cache, compute.AttentionSpec{
			Layer: l, Pos0: pos0, N: n, Heads: benchHeads, KVHeads: benchKVHeads, HeadDim: benchDim,
			Scale: float32(1 / math.Sqrt(benchDim)),
		})
	}
}

// BenchmarkAttentionDecode is one decode step's attention at ctx cached positions: the cache
// (59 MB at 600 positions in float16, 33 MB in int8) is read from memory, as it is between
// a step's weight reads.
func BenchmarkAttentionDecode(b *testing.B) {
	for _, ctx := range []int{64, 600, 2048} {
		for _, typ := range []kv.Type{kv.F16, kv.Int8} {
			b.Run(fmt.Sprintf("ctx=%d/kv=%s", ctx, typ), func(b *testing.B) {
				be, cache, rows := benchAttention(b, 5, ctx+1, ctx, typ)
				q, out := be.NewBuf(benchHeads*benchDim), be.NewBuf(benchHeads*benchDim)
				be.Write(q, rows[:benchHeads*benchDim])
				for b.Loop() {
					attendLayers(be, out, q, cache, ctx-1, 1)
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/token")
			})
		}
	}
}

// BenchmarkAttentionPrefill is a 512-token prompt's attention, from an empty cache.
func BenchmarkAttentionPrefill(b *testing.B) {
	const n = 512
	be, cache, rows := benchAttention(b, 7, n, n, kv.F16)
	q, out := be.NewBuf(n*benchHeads*benchDim), be.NewBuf(n*benchHeads*benchDim)
	be.Write(q, rows)
	for b.Loop() {
		attendLayers(be, out, q, cache, 0, n)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/prompt")
}
