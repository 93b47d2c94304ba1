package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMoEBatchEqualsTokens: a batch of tokens through MoE (grouped by expert, host loops
// split over the pool) gives, bit for bit, what each token alone gives (decode's path), and
// a one-thread backend gives the same bits as a four-thread one.
func TestMoEBatchEqualsTokens(t *testing.T) {
	const hidden, ffn, experts, k, n = 512, 256, 16, 4, 40 // above serialWork, so the loops split
	rng := rand.New(rand.NewPCG(41, 42))
	b := New(Options{Threads: 4})
	defer b.Close()
	one := New(Options{Threads: 1})
	defer one.Close()
	gate := benchWeight(t, "gate", ffn, hidden, experts, rng)
	up := benchWeight(t, "up", ffn, hidden, experts, rng)
	down := benchWeight(t, "down", hidden, ffn, experts, rng)
	routes := benchRoutes(n, experts, k, rng)
	for i := range routes.Weights {
		routes.Weights[i] = rng.Float32()
	}
	xs := make([]float32, n*hidden)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	base := make([]float32, n*hidden) // MoE adds to what dst holds
	for i := range base {
		base[i] = float32(rng.NormFloat64())
	}

	run := func(be *Backend, xs, base []float32, r *routesT) []float32 {
		x, dst := be.NewBuf(len(xs)), be.NewBuf(len(base))
		be.Write(x, xs)
		be.Write(dst, base)
		be.MoE(dst, x, gate, up, down, r)
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(base))
		be.Read(dst, got)
		return got
	}
	batch := run(b, xs, base, routes)
	serial := run(one, xs, base, routes)
	var rms float64
	for i, v := range batch {
		if v != serial[i] {
			t.Fatalf("out[%d] = %g on 4 threads, %g on 1", i, v, serial[i])
		}
		rms += float64(v-base[i]) * float64(v-base[i])
	}
	if rms = math.Sqrt(rms / float64(len(batch))); rms == 0 || math.IsNaN(rms) {
		t.Fatalf("MoE added nothing usable (rms %g)", rms)
	}
	for tok := range n {
		r1 := &routesT{N: 1, K: k, IDs: routes.IDs[tok*k : (tok+1)*k], Weights: routes.Weights[tok*k : (tok+1)*k]}
		got := run(b, xs[tok*hidden:(tok+1)*hidden], base[tok*hidden:(tok+1)*hidden], r1)
		for c, v := range got {
			if w := batch[tok*hidden+c]; v != w {
				t.Fatalf("token %d out[%d] = %g alone, %g in the batch", tok, c, v, w)
			}
		}
	}
}
