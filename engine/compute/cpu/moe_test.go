package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"strata/engine/compute"
	"strata/engine/quant"
)

// The MoE layer of the tests: 16 experts of 512 -> 256 -> 512, top 4.
const moeHidden, moeFFN, moeExperts, moeK = 512, 256, 16, 4

// moeCase makes random expert weights, routes with random weights, and n token rows.
func moeCase(t *testing.T, n int, rng *rand.Rand) (gate, up, down *Weight, r *routesT, xs []float32) {
	gate = benchWeight(t, "gate", moeFFN, moeHidden, moeExperts, rng)
	up = benchWeight(t, "up", moeFFN, moeHidden, moeExperts, rng)
	down = benchWeight(t, "down", moeHidden, moeFFN, moeExperts, rng)
	r = benchRoutes(n, moeExperts, moeK, rng)
	for i := range r.Weights {
		r.Weights[i] = rng.Float32()
	}
	xs = make([]float32, n*moeHidden)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	return gate, up, down, r, xs
}

// TestMoEBatchEqualsTokens: a batch of tokens through MoE (grouped by expert, host loops
// split over the pool, two parallel passes) gives, bit for bit, what each token alone gives
// (decode's one pass, expertsOneToken), with plain experts and with gpt-oss's biases and
// clamped SwiGLU, and a one-thread backend gives the same bits as a four-thread one.
func TestMoEBatchEqualsTokens(t *testing.T) {
	const n = 40 // above serialWork, so the loops split
	rng := rand.New(rand.NewPCG(41, 42))
	b := New(Options{Threads: 4})
	defer b.Close()
	one := New(Options{Threads: 1})
	defer one.Close()
	gate, up, down, routes, xs := moeCase(t, n, rng)
	base := make([]float32, n*moeHidden) // MoE adds to what dst holds
	for i := range base {
		base[i] = float32(rng.NormFloat64())
	}
	biased := &compute.ExpertFFN{
		GateBias: vectorWeight(t, "gate.bias", randomF32(rng, moeExperts*moeFFN, 2), 1, moeFFN, moeExperts),
		UpBias:   vectorWeight(t, "up.bias", randomF32(rng, moeExperts*moeFFN, 2), 1, moeFFN, moeExperts),
		DownBias: vectorWeight(t, "down.bias", randomF32(rng, moeExperts*moeHidden, 0.5), 1, moeHidden, moeExperts),
		Limit:    7, Alpha: 1.702}

	for _, ffn := range []*compute.ExpertFFN{nil, biased} {
		run := func(be *Backend, xs, base []float32, r *routesT) []float32 {
			x, dst := be.NewBuf(len(xs)), be.NewBuf(len(base))
			be.Write(x, xs)
			be.Write(dst, base)
			be.MoE(dst, x, gate, up, down, ffn, r)
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
				t.Fatalf("ffn %v: out[%d] = %g on 4 threads, %g on 1", ffn != nil, i, v, serial[i])
			}
			rms += float64(v-base[i]) * float64(v-base[i])
		}
		if rms = math.Sqrt(rms / float64(len(batch))); rms == 0 || math.IsNaN(rms) {
			t.Fatalf("ffn %v: MoE added nothing usable (rms %g)", ffn != nil, rms)
		}
		for tok := range n {
			r1 := &routesT{N: 1, K: moeK, IDs: routes.IDs[tok*moeK : (tok+1)*moeK], Weights: routes.Weights[tok*moeK : (tok+1)*moeK]}
			for _, be := range []*Backend{b, one} {
				got := run(be, xs[tok*moeHidden:(tok+1)*moeHidden], base[tok*moeHidden:(tok+1)*moeHidden], r1)
				for c, v := range got {
					if w := batch[tok*moeHidden+c]; v != w {
						t.Fatalf("ffn %v, %d threads: token %d out[%d] = %g alone, %g in the batch", ffn != nil, be.Threads(), tok, c, v, w)
					}
				}
			}
		}
		// A token routed twice to one expert (the expert gets two rows) alone and beside
		// another token. Alone runs on a fresh backend: a reused scratch block can hold the
		// pair's outputs, which hid a second row left uncomputed.
		dup := &routesT{N: 2, K: moeK, IDs: []int32{3, 3, 9, 1, 3, 4, 5, 6}, Weights: routes.Weights[:2*moeK]}
		pair := run(b, xs[:2*moeHidden], base[:2*moeHidden], dup)
		fresh := New(Options{Threads: 4})
		alone := run(fresh, xs[:moeHidden], base[:moeHidden], &routesT{N: 1, K: moeK, IDs: dup.IDs[:moeK], Weights: dup.Weights[:moeK]})
		fresh.Close()
		for c, v := range alone {
			if v != pair[c] {
				t.Fatalf("ffn %v: a token routed twice to expert 3: out[%d] = %g alone, %g beside another", ffn != nil, c, v, pair[c])
			}
		}
	}
}

// TestMoEMatchesExpertProducts: MoE (token rows quantised once and gathered into the
// experts' batches) gives, bit for bit, each token's experts computed one by one, in
// ascending expert order, from that token's own quantised row.
func TestMoEMatchesExpertProducts(t *testing.T) {
	const n = 24
	rng := rand.New(rand.NewPCG(43, 44))
	b := New(Options{Threads: 2})
	defer b.Close()
	gate, up, down, routes, xs := moeCase(t, n, rng)
	x, dst := b.NewBuf(len(xs)), b.NewBuf(len(xs)) // dst starts at zero
	b.Write(x, xs)
	b.MoE(dst, x, gate, up, down, nil, routes)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(xs))
	b.Read(dst, got)

	product := func(w *Weight, e int, in []float32) []float32 {
		a, err := quant.NewActivations(w.typ, w.cols, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Set(0, in); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, w.rows)
		if err := quant.MatMul(w.typ, w.expert(e), w.cols, a, y, w.rows, 0, w.rows); err != nil {
			t.Fatal(err)
		}
		return y
	}
	for tok := range n {
		ks := []int{}
		for j := range moeK {
			ks = append(ks, tok*moeK+j)
		}
		slices.SortFunc(ks, func(a, b int) int { return int(routes.IDs[a]) - int(routes.IDs[b]) })
		want := make([]float32, moeHidden)
		in := xs[tok*moeHidden : (tok+1)*moeHidden]
		for _, r := range ks {
			e := int(routes.IDs[r])
			g, u := product(gate, e, in), product(up, e, in)
			swiGLU(g, u)
			for c, v := range product(down, e, g) {
				want[c] += routes.Weights[r] * v
			}
		}
		for c, w := range want {
			if v := got[tok*moeHidden+c]; v != w {
				t.Fatalf("token %d out[%d] = %g, want %g (its experts one by one)", tok, c, v, w)
			}
		}
	}
}
