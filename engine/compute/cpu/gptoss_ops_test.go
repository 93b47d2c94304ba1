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

func randomF32(rng *rand.Rand, n int, scale float64) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64() * scale)
	}
	return xs
}

func vectorWeight(t *testing.T, name string, vals []float32, rows, cols, experts int) *Weight {
	t.Helper()
	w, err := NewWeight(compute.WeightSpec{Name: name, Type: quant.F32, Rows: rows, Cols: cols, Experts: experts, Data: f32Bytes(vals)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func f32Bytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

// TestAttentionSinksWindowRing: attention with per-head sinks and a sliding window (or none),
// over a cache whose layer keeps only window+batch-1 positions (a ring), fed in batches as
// the model feeds it, against a float64 reference over every key, for every cache type (the
// f16 one through the vector kernel's runs where it runs) and head sizes that are not powers
// of two.
func TestAttentionSinksWindowRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	b := New(Options{Threads: 3})
	defer b.Close()
	for _, c := range []struct{ heads, kvHeads, dim, window, batch int }{
		{8, 2, 32, 8, 5}, {6, 3, 48, 5, 3}, {4, 4, 24, 1, 2}, {4, 1, 16, 100, 4}, {8, 2, 64, 0, 7}, {8, 8, 40, 3, 1},
	} {
		for _, typ := range []kv.Type{kv.F32, kv.F16, kv.Int8} {
			t.Run(fmt.Sprintf("h%d/kv%d/d%d/w%d/%s", c.heads, c.kvHeads, c.dim, c.window, typ), func(t *testing.T) {
				const total, layer = 29, 1
				keep := []int{0, 0}
				if c.window > 0 {
					keep[1] = c.window + c.batch - 1
				}
				cache, err := kv.NewKept(2, c.kvHeads, c.dim, total, typ, keep)
				if err != nil {
					t.Fatal(err)
				}
				if want := kv.Kept(keep[1], total); cache.Kept(layer) != want {
					t.Fatalf("layer keeps %d positions, want %d", cache.Kept(layer), want)
				}
				row := c.kvHeads * c.dim
				keys, vals := randomF32(rng, total*row, 1), randomF32(rng, total*row, 1)
				sinkVals := randomF32(rng, c.heads, 1.5)
				sinks := vectorWeight(t, "sinks", sinkVals, 1, c.heads, 1)
				scale := float32(1 / math.Sqrt(float64(c.dim)))
				keysAt, valsAt := roundAsCache(keys, c.dim, typ), roundAsCache(vals, c.dim, typ)
				group := c.heads / c.kvHeads
				for pos0 := 0; pos0 < total; pos0 += c.batch {
					n := min(c.batch, total-pos0)
					cache.Store(layer, pos0, n, keys[pos0*row:(pos0+n)*row], vals[pos0*row:(pos0+n)*row])
					q := randomF32(rng, n*c.heads*c.dim, 1)
					out := make([]float32, len(q))
					b.Attention(buf(out), buf(q), cache, compute.AttentionSpec{Layer: layer, Pos0: pos0, N: n, Heads: c.heads,
						KVHeads: c.kvHeads, HeadDim: c.dim, Scale: scale, Sinks: sinks, Window: c.window})
					if err := b.Err(); err != nil {
						t.Fatal(err)
					}
					for tok := range n {
						last := pos0 + tok
						first := 0
						if c.window > 0 {
							first = max(0, last-c.window+1)
						}
						for h := range c.heads {
							g := h / group
							qv := q[(tok*c.heads+h)*c.dim:]
							w := make([]float64, last+1)
							maxv := float64(sinkVals[h])
							for p := first; p <= last; p++ {
								var dot float64
								for i := range c.dim {
									dot += float64(qv[i]) * float64(keysAt[p*row+g*c.dim+i])
								}
								w[p] = dot * float64(scale)
								maxv = max(maxv, w[p])
							}
							sum := math.Exp(float64(sinkVals[h]) - maxv)
							for p := first; p <= last; p++ {
								w[p] = math.Exp(w[p] - maxv)
								sum += w[p]
							}
							for i := range c.dim {
								var want float64
								for p := first; p <= last; p++ {
									want += w[p] / sum * float64(valsAt[p*row+g*c.dim+i])
								}
								got := out[(tok*c.heads+h)*c.dim+i]
								if d := math.Abs(float64(got) - want); !(d <= 2e-5*(1+math.Abs(want))) {
									t.Fatalf("position %d head %d dim %d: got %g, want %g", last, h, i, got, want)
								}
							}
						}
					}
				}
			})
		}
	}
}

// TestRoPETable: RoPE with the plain NeoX frequencies equals RoPENeoX (up to RoPE's angle,
// rounded to float32 as transformers rounds it); Scale multiplies the result; a table shorter than half the head rotates the first dims and leaves the rest.
func TestRoPETable(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	b := New(Options{Threads: 2})
	defer b.Close()
	const n, heads, dim, base = 5, 3, 24, 10000
	positions := []int{0, 1, 7, 300, 1000}
	x := randomF32(rng, n*heads*dim, 1)
	ref := append([]float32(nil), x...)
	b.RoPENeoX(buf(ref), n, heads, dim, positions, base)
	plain := &compute.Rope{InvFreq: make([]float32, dim/2), Scale: 2}
	for i := range plain.InvFreq {
		plain.InvFreq[i] = float32(1 / math.Pow(base, float64(2*i)/float64(dim)))
	}
	got := append([]float32(nil), x...)
	b.RoPE(buf(got), n, heads, dim, positions, plain)
	for i := range got {
		if d := math.Abs(float64(got[i]) - 2*float64(ref[i])); d > 1e-4*(1+math.Abs(float64(ref[i]))) {
			t.Fatalf("value %d: RoPE %g, twice RoPENeoX %g", i, got[i], 2*ref[i])
		}
	}
	partial := &compute.Rope{InvFreq: []float32{1, 0.5, 0.25}}
	got = append(got[:0], x...)
	b.RoPE(buf(got), n, heads, dim, positions, partial)
	for tok, pos := range positions {
		for h := range heads {
			v, o := x[(tok*heads+h)*dim:], got[(tok*heads+h)*dim:]
			for i := range dim {
				want := float64(v[i])
				if i < 6 {
					j := i % 3
					a := float64(float32(pos) * partial.InvFreq[j])
					if i < 3 {
						want = float64(v[i])*math.Cos(a) - float64(v[i+3])*math.Sin(a)
					} else {
						want = float64(v[i])*math.Cos(a) + float64(v[i-3])*math.Sin(a)
					}
				}
				if d := math.Abs(float64(o[i]) - want); d > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("position %d head %d dim %d: got %g, want %g", pos, h, i, o[i], want)
				}
			}
		}
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	b.RoPE(buf(got), n, heads, 4, positions, partial)
	if b.Err() == nil {
		t.Error("a table of 3 pairs over heads of 4 values was accepted")
	}
}

// TestMoEExpertFFN: the MoE with expert biases and the clamped SwiGLU (float path, odd
// sizes, pre-activations well past the clamp) against a float64 reference.
func TestMoEExpertFFN(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const H, F, E, K, n = 40, 24, 5, 2, 7
	const limit, alpha = 7, 1.702
	b := New(Options{Threads: 3, FloatPath: true})
	defer b.Close()
	gv, uv, dv := randomF32(rng, E*F*H, 1.5), randomF32(rng, E*F*H, 1.5), randomF32(rng, E*H*F, 0.2)
	gb, ub, db := randomF32(rng, E*F, 2), randomF32(rng, E*F, 2), randomF32(rng, E*H, 0.5)
	G, U, D := vectorWeight(t, "gate", gv, F, H, E), vectorWeight(t, "up", uv, F, H, E), vectorWeight(t, "down", dv, H, F, E)
	ffn := &compute.ExpertFFN{GateBias: vectorWeight(t, "gate.bias", gb, 1, F, E), UpBias: vectorWeight(t, "up.bias", ub, 1, F, E),
		DownBias: vectorWeight(t, "down.bias", db, 1, H, E), Limit: limit, Alpha: alpha}
	xs := randomF32(rng, n*H, 1)
	r := &compute.Routes{N: n, K: K, IDs: make([]int32, n*K), Weights: make([]float32, n*K)}
	for tok := range n {
		perm := rng.Perm(E)
		for j := range K {
			r.IDs[tok*K+j], r.Weights[tok*K+j] = int32(perm[j]), rng.Float32()
		}
	}
	out := make([]float32, n*H)
	b.MoE(buf(out), buf(xs), G, U, D, ffn, r)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	clamped := 0
	for tok := range n {
		x := xs[tok*H : (tok+1)*H]
		want := make([]float64, H)
		for j := range K {
			e, w := int(r.IDs[tok*K+j]), float64(r.Weights[tok*K+j])
			a := make([]float64, F)
			for f := range F {
				g, u := float64(gb[e*F+f]), float64(ub[e*F+f])
				for i := range H {
					g += float64(gv[(e*F+f)*H+i]) * float64(x[i])
					u += float64(uv[(e*F+f)*H+i]) * float64(x[i])
				}
				if g > limit || math.Abs(u) > limit {
					clamped++
				}
				g, u = math.Min(g, limit), math.Max(math.Min(u, limit), -limit)
				a[f] = g / (1 + math.Exp(-alpha*g)) * (u + 1)
			}
			for h := range H {
				y := float64(db[e*H+h])
				for f := range F {
					y += float64(dv[(e*H+h)*F+f]) * a[f]
				}
				want[h] += w * y
			}
		}
		for h := range H {
			if d := math.Abs(float64(out[tok*H+h]) - want[h]); d > 1e-4*(1+math.Abs(want[h])) {
				t.Fatalf("token %d value %d: got %g, want %g", tok, h, out[tok*H+h], want[h])
			}
		}
	}
	if clamped == 0 {
		t.Fatal("no pre-activation reached the clamp: the test would not see it")
	}
}
