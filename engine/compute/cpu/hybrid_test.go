package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/compute"
	"strata/engine/quant"
)

func f32Weight(t *testing.T, name string, rows, cols int, vals []float32) *Weight {
	t.Helper()
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	w, err := NewWeight(compute.WeightSpec{Name: name, Type: quant.F32, Rows: rows, Cols: cols, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func randoms(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// within fails t when got and want differ by more than tol·max(1, max|want|).
func within(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	var m, d float64
	for i := range want {
		m = math.Max(m, math.Abs(float64(want[i])))
		d = math.Max(d, math.Abs(float64(got[i])-float64(want[i])))
	}
	if d > tol*math.Max(1, m) {
		t.Fatalf("%s: max |Δ| %.3g (values up to %.3g), limit %.3g relative", what, d, m, tol)
	}
}

// TestCausalConv1D checks the conv against a float64 reference with zeros before the first
// token, in one call and split in two calls that carry the state, on odd shapes.
func TestCausalConv1D(t *testing.T) {
	b := New(Options{Threads: 2})
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range []struct{ C, K, n, split int }{{7, 4, 9, 4}, {5, 3, 6, 1}, {300, 4, 250, 249}} {
		taps := randoms(rng, sh.C*sh.K, 0.5)
		x := randoms(rng, sh.n*sh.C, 1)
		want := make([]float32, sh.n*sh.C)
		for c := range sh.C {
			for tk := range sh.n {
				var s float64
				for j := range sh.K {
					if i := tk - sh.K + 1 + j; i >= 0 {
						s += float64(taps[c*sh.K+j]) * float64(x[i*sh.C+c])
					}
				}
				want[tk*sh.C+c] = float32(s)
			}
		}
		w := f32Weight(t, "conv", sh.C, sh.K, taps)
		state := b.NewBuf((sh.K - 1) * sh.C)
		got := b.NewBuf(sh.n * sh.C)
		b.CausalConv1D(got, buf(x), state, w, sh.n)
		within(t, "one call", f32(got), want, 1e-5)

		state = b.NewBuf((sh.K - 1) * sh.C)
		p1, p2 := b.NewBuf(sh.split*sh.C), b.NewBuf((sh.n-sh.split)*sh.C)
		b.CausalConv1D(p1, buf(x[:sh.split*sh.C]), state, w, sh.split)
		b.CausalConv1D(p2, buf(x[sh.split*sh.C:]), state, w, sh.n-sh.split)
		within(t, "two calls", append(append([]float32(nil), f32(p1)...), f32(p2)...), want, 1e-5)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// deltaReference is the gated delta rule token by token in float64, from the formulas of
// compute.DeltaSpec.
func deltaReference(s compute.DeltaSpec, qkv, alpha, beta, dtBias, A []float32, state []float64) []float32 {
	KH, VH, KD, VD, C := s.KHeads, s.VHeads, s.KDim, s.VDim, s.Channels()
	out := make([]float32, s.N*VH*VD)
	norm := func(x []float32, scale float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		r := scale / math.Sqrt(ss+1e-6)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v) * r
		}
		return y
	}
	for t := range s.N {
		row := qkv[t*C : (t+1)*C]
		for h := range VH {
			kh := s.KeyHead(h)
			q := norm(row[kh*KD:(kh+1)*KD], float64(s.Scale))
			k := norm(row[(KH+kh)*KD:(KH+kh+1)*KD], 1)
			v := row[2*KH*KD+h*VD : 2*KH*KD+(h+1)*VD]
			a := float64(alpha[t*VH+h]) + float64(dtBias[h])
			g := math.Log1p(math.Exp(a)) * float64(A[h])
			bt := 1 / (1 + math.Exp(-float64(beta[t*VH+h])))
			S := state[h*KD*VD : (h+1)*KD*VD]
			for i := range S {
				S[i] *= math.Exp(g)
			}
			for j := range VD {
				var mem float64
				for i := range KD {
					mem += S[i*VD+j] * k[i]
				}
				d := (float64(v[j]) - mem) * bt
				for i := range KD {
					S[i*VD+j] += k[i] * d
				}
			}
			for j := range VD {
				var o float64
				for i := range KD {
					o += S[i*VD+j] * q[i]
				}
				out[(t*VH+h)*VD+j] = float32(o)
			}
		}
	}
	return out
}

// TestGatedDeltaNet checks the chunked (prompt) and recurrent (decode) forms against the
// float64 reference on odd shapes, in both value-head orders, across chunk boundaries and
// with the state carried between calls.
func TestGatedDeltaNet(t *testing.T) {
	b := New(Options{Threads: 2})
	defer b.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, grouped := range []bool{false, true} {
		s := compute.DeltaSpec{N: 37, KHeads: 3, VHeads: 6, KDim: 5, VDim: 7, Scale: 0.4, GroupedVHeads: grouped}
		C, VH := s.Channels(), s.VHeads
		qkv := randoms(rng, s.N*C, 1)
		alpha, beta := randoms(rng, s.N*VH, 1), randoms(rng, s.N*VH, 1.5)
		dtb, A := randoms(rng, VH, 0.5), make([]float32, VH)
		for i := range A {
			A[i] = -float32(0.1 + rng.Float64())
		}
		s.DtBias, s.A = f32Weight(t, "dt_bias", 1, VH, dtb), f32Weight(t, "a", 1, VH, A)
		want := deltaReference(s, qkv, alpha, beta, dtb, A, make([]float64, s.StateLen()))

		// One call (chunked), then a prompt of 20 followed by 17 single tokens.
		st, got := b.NewBuf(s.StateLen()), b.NewBuf(s.N*VH*s.VDim)
		b.GatedDeltaNet(got, buf(qkv), buf(alpha), buf(beta), st, s)
		within(t, "chunked", f32(got), want, 1e-5)

		st = b.NewBuf(s.StateLen())
		var steps []float32
		for t0 := 0; t0 < s.N; {
			n := 1
			if t0 == 0 {
				n = 20
			}
			p := s
			p.N = n
			o := b.NewBuf(n * VH * s.VDim)
			b.GatedDeltaNet(o, buf(qkv[t0*C:]), buf(alpha[t0*VH:]), buf(beta[t0*VH:]), st, p)
			steps = append(steps, f32(o)...)
			t0 += n
		}
		within(t, "prompt then decode", steps, want, 1e-5)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
	}

	// The chunked form with small blocks, several of them and a partial last one, against the
	// recurrent form on one head.
	const n, KD, VD = 29, 6, 3
	q, k, v := randoms(rng, n*KD, 0.4), randoms(rng, n*KD, 0.4), randoms(rng, n*VD, 1)
	g, bt := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i], bt[i] = -float32(rng.Float64()), float32(rng.Float64())
	}
	S1, S2 := randoms(rng, KD*VD, 1), make([]float32, KD*VD)
	copy(S2, S1)
	o1, o2 := make([]float32, n*VD), make([]float32, n*VD)
	deltaRecurrent(S1, q, k, v, g, bt, o1, n, KD, VD)
	deltaChunked(S2, q, k, v, g, bt, o2, n, KD, VD, 8)
	within(t, "chunks of 8: outputs", o2, o1, 1e-5)
	within(t, "chunks of 8: state", S2, S1, 1e-5)
}

// TestGatedDeltaNetBadShapes: sizes that do not fit give an error, not a panic.
func TestGatedDeltaNetBadShapes(t *testing.T) {
	b := New(Options{Threads: 1})
	defer b.Close()
	s := compute.DeltaSpec{N: 2, KHeads: 2, VHeads: 3, KDim: 4, VDim: 4, Scale: 1,
		DtBias: f32Weight(t, "dt", 1, 3, make([]float32, 3)), A: f32Weight(t, "a", 1, 3, make([]float32, 3))}
	big := b.NewBuf(1000)
	b.GatedDeltaNet(big, big, big, big, big, s)
	if err := b.Err(); err == nil {
		t.Fatal("3 value heads over 2 key heads gave no error")
	}
	s.VHeads = 4
	b.GatedDeltaNet(big, big, big, big, b.NewBuf(3), s)
	if err := b.Err(); err == nil {
		t.Fatal("a state of 3 values gave no error")
	}
}

// TestGatedRMSNorm checks rmsnorm(x)·w·silu(z) against float64.
func TestGatedRMSNorm(t *testing.T) {
	b := New(Options{Threads: 1})
	defer b.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, dim = 3, 7
	x, z, w := randoms(rng, rows*dim, 2), randoms(rng, rows*dim, 2), randoms(rng, dim, 1)
	want := make([]float32, rows*dim)
	for r := range rows {
		var ss float64
		for i := range dim {
			ss += float64(x[r*dim+i]) * float64(x[r*dim+i])
		}
		sc := 1 / math.Sqrt(ss/dim+1e-6)
		for i := range dim {
			zz := float64(z[r*dim+i])
			want[r*dim+i] = float32(float64(x[r*dim+i]) * sc * float64(w[i]) * zz / (1 + math.Exp(-zz)))
		}
	}
	got := b.NewBuf(rows * dim)
	b.GatedRMSNorm(got, buf(x), buf(z), f32Weight(t, "norm", 1, dim, w), rows, 1e-6)
	within(t, "gated norm", f32(got), want, 1e-6)
}
