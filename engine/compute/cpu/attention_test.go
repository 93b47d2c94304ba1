package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/compute"
	"strata/engine/kv"
	"strata/engine/quant"
)

// TestAttentionMatchesReference runs causal grouped-query attention over float16 and float32
// caches (the vector kernel and the Go loop) against a float64 softmax(q·k)·v, for group
// sizes the kernel takes whole (1, 2, 4, 8) and in pieces (6, 16), at decode and prefill,
// and with sixteen threads over 600 positions, where the kernel's tasks are cut into parts
// that are merged afterwards.
func TestAttentionMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, threads := range []int{3, 16} {
		b := New(Options{Threads: threads})
		t.Cleanup(func() { b.Close() })
		steps := []struct{ pos0, n int }{{0, 1}, {0, 5}, {37, 1}, {37, 6}}
		if threads == 16 {
			steps = []struct{ pos0, n int }{{600, 1}, {600, 2}, {250, 3}}
		}
		for _, c := range []struct{ heads, kvHeads, dim int }{
			{12, 12, 16}, {8, 4, 64}, {8, 2, 64}, {32, 4, 128}, {6, 1, 32}, {16, 1, 256}, {4, 2, 12},
		} {
			for _, typ := range []kv.Type{kv.F16, kv.F32} {
				for _, step := range steps {
					name := fmt.Sprintf("threads%d/h%d/kv%d/d%d/%s/pos%d+%d", threads, c.heads, c.kvHeads, c.dim, typ, step.pos0, step.n)
					t.Run(name, func(t *testing.T) {
						checkAttention(t, b, rng, c.heads, c.kvHeads, c.dim, typ, step.pos0, step.n)
					})
				}
			}
		}
	}
}

// TestAttentionParts checks when the tasks are cut: only with idle threads and enough positions.
func TestAttentionParts(t *testing.T) {
	for _, c := range []struct{ tasks, positions, threads, want int }{
		{4, 600, 2, 1}, {4, 600, 16, 4}, {4, 300, 16, 2}, {4, 100, 16, 1}, {8, 4096, 16, 2}, {64, 4096, 16, 1}, {1, 4096, 16, 16},
	} {
		if got := attentionParts(c.tasks, c.positions, c.threads); got != c.want {
			t.Errorf("attentionParts(%d tasks, %d positions, %d threads) = %d, want %d", c.tasks, c.positions, c.threads, got, c.want)
		}
	}
}

func checkAttention(t *testing.T, b *Backend, rng *rand.Rand, heads, kvHeads, dim int, typ kv.Type, pos0, n int) {
	const layer = 1
	total := pos0 + n
	cache, err := kv.New(2, kvHeads, dim, total, typ)
	if err != nil {
		t.Fatal(err)
	}
	random := func(m int) []float32 {
		xs := make([]float32, m)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		return xs
	}
	keys, values := random(total*kvHeads*dim), random(total*kvHeads*dim)
	cache.Store(layer, 0, total, keys, values)
	q := random(n * heads * dim)
	out := make([]float32, len(q))
	scale := float32(1 / math.Sqrt(float64(dim)))
	b.Attention(buf(out), buf(q), cache, compute.AttentionSpec{
		Layer: layer, Pos0: pos0, N: n, Heads: heads, KVHeads: kvHeads, HeadDim: dim, Scale: scale,
	})
	// A token among others gets the bits it gets alone (as decode runs it), unless alone its
	// positions would be cut into parts.
	for tok := range n {
		if attentionParts(kvHeads, pos0+tok+1, b.pool.Size()) > 1 {
			continue
		}
		alone := make([]float32, heads*dim)
		b.Attention(buf(alone), buf(q[tok*heads*dim:(tok+1)*heads*dim]), cache, compute.AttentionSpec{
			Layer: layer, Pos0: pos0 + tok, N: 1, Heads: heads, KVHeads: kvHeads, HeadDim: dim, Scale: scale,
		})
		for i, g := range alone {
			if w := out[tok*heads*dim+i]; g != w {
				t.Fatalf("token %d value %d: %g alone, %g among %d tokens", tok, i, g, w, n)
			}
		}
	}
	// What the cache holds, as float64: the stored rows, rounded as the cache rounds them.
	at := func(p, g, i int, isKey bool) float64 {
		x := values[(p*kvHeads+g)*dim+i]
		if isKey {
			x = keys[(p*kvHeads+g)*dim+i]
		}
		if typ == kv.F16 {
			x = quant.FP16ToFP32(quant.FP32ToFP16(x))
		}
		return float64(x)
	}
	group := heads / kvHeads
	for tok := range n {
		last := pos0 + tok
		for h := range heads {
			g := h / group
			qv := q[(tok*heads+h)*dim : (tok*heads+h+1)*dim]
			w := make([]float64, last+1)
			maxv := math.Inf(-1)
			for p := range w {
				var dot float64
				for i, x := range qv {
					dot += float64(x) * at(p, g, i, true)
				}
				w[p] = dot * float64(scale)
				maxv = max(maxv, w[p])
			}
			var sum float64
			for p := range w {
				w[p] = math.Exp(w[p] - maxv)
				sum += w[p]
			}
			for i := range dim {
				var want float64
				for p := range w {
					want += w[p] / sum * at(p, g, i, false)
				}
				got := out[(tok*heads+h)*dim+i]
				if d := math.Abs(float64(got) - want); !(d <= 2e-5*(1+math.Abs(want))) {
					t.Fatalf("token %d head %d dim %d: got %g, want %g", tok, h, i, got, want)
				}
			}
		}
	}
}
