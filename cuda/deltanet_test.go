package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// The Gated DeltaNet kernels against float64 references on odd shapes.

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func within(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*math.Max(1, math.Abs(want[i]))) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

// conv1dRef is the causal conv over state rows then x, per channel; it returns the outputs
// and the new state.
func conv1dRef(x, state, w []float32, n, C, K int) (y, st []float64) {
	y = make([]float64, n*C)
	st = make([]float64, (K-1)*C)
	for c := range C {
		hist := make([]float64, 0, K-1+n)
		for j := range K - 1 {
			hist = append(hist, float64(state[j*C+c]))
		}
		for t := range n {
			hist = append(hist, float64(x[t*C+c]))
		}
		for t := range n {
			for j := range K {
				y[t*C+c] += float64(w[c*K+j]) * hist[t+j]
			}
		}
		for j := range K - 1 {
			st[j*C+c] = hist[n+j]
		}
	}
	return y, st
}

// TestConv1DCausal: a prompt, then a decode step on the state it left, for 3, 4 and 5 taps
// over an odd channel count, with f32 and f16 taps; the output written over the input too.
func TestConv1DCausal(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(41, 42))
	const C = 301
	for _, K := range []int{3, 4, 5} {
		for _, f16 := range []bool{false, true} {
			w := randFloats(r, C*K, 1)
			var dw cuda.DevicePtr
			if f16 {
				h := toF16(w)
				w = fromF16(h)
				dw = upload(t, g, h)
			} else {
				dw = upload(t, g, w)
			}
			state := randFloats(r, (K-1)*C, 1)
			ds := upload(t, g, state)
			for step, n := range []int{7, 1, 2} {
				x := randFloats(r, n*C, 1)
				dx := upload(t, g, x)
				dy := dx // in place on the middle step
				if step != 1 {
					dy = g.buf(t, 4*n*C)
				}
				if err := g.k.Conv1DCausal(g.s, dx, dy, ds, dw, f16, n, C, K); err != nil {
					t.Fatal(err)
				}
				wantY, wantS := conv1dRef(x, state, w, n, C, K)
				within(t, "conv out", download[float32](t, g, dy, n*C), wantY, 1e-5)
				state = download[float32](t, g, ds, (K-1)*C)
				within(t, "conv state", state, wantS, 0)
			}
		}
	}
	if err := g.k.Conv1DCausal(g.s, 0, 0, 0, 0, false, 1, C, cuda.ConvMaxTaps+1); err == nil {
		t.Error("a conv of too many taps launched")
	}
}

func TestSiLUMulSigmoidSigmoidRoutes(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(43, 44))
	const n = 1001
	x, gate := randFloats(r, n, 9), randFloats(r, n, 9)
	dx, dg := upload(t, g, x), upload(t, g, gate)
	if err := g.k.SiLU(g.s, dx, n); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, n)
	for i, v := range x {
		want[i] = float64(v) * sigmoid64(float64(v))
	}
	within(t, "silu", download[float32](t, g, dx, n), want, 1e-6)
	if err := g.k.MulSigmoid(g.s, dx, dg, n); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] *= sigmoid64(float64(gate[i]))
	}
	within(t, "mul_sigmoid", download[float32](t, g, dx, n), want, 1e-6)
	ids, ws := g.buf(t, 4*n), g.buf(t, 4*n)
	if err := g.k.SigmoidRoutes(g.s, dg, ids, ws, n); err != nil {
		t.Fatal(err)
	}
	for i, id := range download[int32](t, g, ids, n) {
		if id != 0 {
			t.Fatalf("token %d routed to expert %d, want 0", i, id)
		}
	}
	for i := range want {
		want[i] = sigmoid64(float64(gate[i]))
	}
	within(t, "sigmoid routes", download[float32](t, g, ws, n), want, 1e-6)
}

// TestL2NormQK: q and k heads of an odd size inside wider qkv rows.
func TestL2NormQK(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(45, 46))
	const n, kh, dim, scale, eps = 5, 3, 45, 0.3, 1e-6
	const row = 2*kh*dim + 17 // the values follow q and k in each row
	qkv := randFloats(r, n*row, 2)
	dq := upload(t, g, qkv)
	dy := g.buf(t, 4*n*2*kh*dim)
	if err := g.k.L2NormQK(g.s, dq, row, dy, n, kh, dim, scale, eps); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, n*2*kh*dim)
	for tk := range n {
		for h := range 2 * kh {
			x := qkv[tk*row+h*dim : tk*row+(h+1)*dim]
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			f := 1 / math.Sqrt(ss+eps)
			if h < kh {
				f *= scale
			}
			for i, v := range x {
				want[(tk*2*kh+h)*dim+i] = float64(v) * f
			}
		}
	}
	within(t, "l2 norm", download[float32](t, g, dy, len(want)), want, 1e-6)
}

// deltaRef runs the gated delta rule token by token in float64 over state (updated in place)
// and returns the outputs [n][vh][vd].
func deltaRef(qk, v []float32, vStride int, alpha, beta, dtBias, a []float32, state []float64, d cuda.DeltaShape) []float64 {
	n, kh, vh, kd, vd := d.Tokens, d.KHeads, d.VHeads, d.KDim, d.VDim
	out := make([]float64, n*vh*vd)
	for h := range vh {
		khd := h % kh
		if d.Grouped {
			khd = h / (vh / kh)
		}
		S := state[h*kd*vd : (h+1)*kd*vd]
		for t := range n {
			q := qk[(t*2*kh+khd)*kd:]
			k := qk[(t*2*kh+kh+khd)*kd:]
			x := float64(alpha[t*vh+h] + dtBias[h])
			sp := math.Log1p(math.Exp(x))
			if x > 20 {
				sp = x
			}
			decay := math.Exp(sp * float64(a[h]))
			b := sigmoid64(float64(beta[t*vh+h]))
			for j := range vd {
				var mem float64
				for i := range kd {
					S[i*vd+j] *= decay
					mem += S[i*vd+j] * float64(k[i])
				}
				delta := (float64(v[t*vStride+h*vd+j]) - mem) * b
				var o float64
				for i := range kd {
					S[i*vd+j] += float64(k[i]) * delta
					o += S[i*vd+j] * float64(q[i])
				}
				out[(t*vh+h)*vd+j] = o
			}
		}
	}
	return out
}

// TestGatedDeltaRule: a prompt and then decode steps continuing its state, on shapes with an
// odd key head size, value heads wider than one 32-column tile and not a multiple of it, 3
// value heads per key head in the grouped and the tiled order, and key heads large enough to
// split over the most warps.
func TestGatedDeltaRule(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(47, 48))
	for _, d := range []cuda.DeltaShape{
		{KHeads: 2, VHeads: 6, KDim: 19, VDim: 45, Grouped: true},
		{KHeads: 2, VHeads: 6, KDim: 19, VDim: 45},
		{KHeads: 1, VHeads: 2, KDim: 130, VDim: 33},
	} {
		state, ds, ddt, da, dtBias, a := deltaStart(t, g, r, d)
		for _, n := range []int{9, 1, 1, 3} {
			d.Tokens = n
			qk, v, alpha, beta, vStride := deltaInputs(r, d)
			dqk, dv, dal, dbe := upload(t, g, qk), upload(t, g, v), upload(t, g, alpha), upload(t, g, beta)
			dout := g.buf(t, 4*n*d.VHeads*d.VDim)
			if err := g.k.GatedDeltaRule(g.s, dqk, dv, vStride, dal, dbe, ddt, da, ds, dout, d); err != nil {
				t.Fatal(err)
			}
			want := deltaRef(qk, v, vStride, alpha, beta, dtBias, a, state, d)
			within(t, "delta out", download[float32](t, g, dout, len(want)), want, 2e-5)
			within(t, "delta state", download[float32](t, g, ds, len(state)), state, 2e-5)
		}
	}
	if err := g.k.GatedDeltaRule(g.s, 0, 0, 0, 0, 0, 0, 0, 0, 0, cuda.DeltaShape{Tokens: 1, KHeads: 2, VHeads: 3, KDim: 8, VDim: 8}); err == nil {
		t.Error("3 value heads over 2 key heads launched")
	}
}

// deltaStart draws a layer's starting state (also as float64, for the reference) and its
// gate's dt bias and A (-exp(A_log), as the files store it), and uploads them.
func deltaStart(t *testing.T, g *gpu, r *rand.Rand, d cuda.DeltaShape) (state []float64, ds, ddt, da cuda.DevicePtr, dtBias, a []float32) {
	stateF := randFloats(r, d.VHeads*d.KDim*d.VDim, 0.5)
	state = make([]float64, len(stateF))
	for i, v := range stateF {
		state[i] = float64(v)
	}
	ds = upload(t, g, stateF)
	dtBias = randFloats(r, d.VHeads, 1)
	a = randFloats(r, d.VHeads, 1)
	for i := range a {
		a[i] = -float32(math.Exp(float64(a[i])))
	}
	return state, ds, upload(t, g, dtBias), upload(t, g, a), dtBias, a
}

// deltaInputs draws one call's inputs: q (scaled) and k
// normalised as l2_norm_qk leaves them, v inside rows wider than the value heads.
func deltaInputs(r *rand.Rand, d cuda.DeltaShape) (qk, v, alpha, beta []float32, vStride int) {
	n := d.Tokens
	qk = randFloats(r, n*2*d.KHeads*d.KDim, 1)
	for h := range n * 2 * d.KHeads {
		x := qk[h*d.KDim : (h+1)*d.KDim]
		f := 1 / float32(norm(x))
		if h%(2*d.KHeads) < d.KHeads {
			f /= float32(math.Sqrt(float64(d.KDim)))
		}
		for i := range x {
			x[i] *= f
		}
	}
	vStride = d.VHeads*d.VDim + 11
	v = randFloats(r, n*vStride, 1)
	return qk, v, randFloats(r, n*d.VHeads, 3), randFloats(r, n*d.VHeads, 3), vStride
}

// maxDelta is the largest |got - want| / max(1, |want|).
func maxDelta(got []float32, want []float64) float64 {
	var worst float64
	for i := range want {
		d := math.Abs(float64(got[i])-want[i]) / math.Max(1, math.Abs(want[i]))
		if !(d <= worst) {
			worst = d
		}
	}
	return worst
}

// TestGatedDeltaRuleChunked: the chunked kernel against the sequential float64 reference on
// a prompt longer than two chunks and not a multiple of one, then calls of one token, exactly
// one chunk and a few tokens continuing its state; odd key and value head sizes, value heads
// wider than one 32-column tile, the grouped and the tiled order, and the published head
// size (128) with two 32-column tiles a head.
func TestGatedDeltaRuleChunked(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(51, 52))
	const tol = 1e-4
	for _, d := range []cuda.DeltaShape{
		{KHeads: 2, VHeads: 6, KDim: 19, VDim: 45, Grouped: true},
		{KHeads: 2, VHeads: 6, KDim: 19, VDim: 45},
		{KHeads: 1, VHeads: 2, KDim: 128, VDim: 64},
		{KHeads: 2, VHeads: 4, KDim: 128, VDim: 33, Grouped: true},
	} {
		state, ds, ddt, da, dtBias, a := deltaStart(t, g, r, d)
		for _, n := range []int{2*cuda.DeltaChunk + 13, 1, cuda.DeltaChunk, 5} {
			d.Tokens = n
			qk, v, alpha, beta, vStride := deltaInputs(r, d)
			dqk, dv, dal, dbe := upload(t, g, qk), upload(t, g, v), upload(t, g, alpha), upload(t, g, beta)
			dout := g.buf(t, 4*n*d.VHeads*d.VDim)
			if err := g.k.GatedDeltaRuleChunked(g.s, dqk, dv, vStride, dal, dbe, ddt, da, ds, dout, d); err != nil {
				t.Fatal(err)
			}
			want := deltaRef(qk, v, vStride, alpha, beta, dtBias, a, state, d)
			got, gotState := download[float32](t, g, dout, len(want)), download[float32](t, g, ds, len(state))
			eo, es := maxDelta(got, want), maxDelta(gotState, state)
			t.Logf("%+v: out within %.2g, state within %.2g", d, eo, es)
			if !(eo <= tol && es <= tol) {
				t.Fatalf("%+v: out off by %.3g, state by %.3g, want at most %g", d, eo, es, tol)
			}
		}
	}
	big := cuda.DeltaShape{Tokens: 4, KHeads: 1, VHeads: 1, KDim: cuda.MaxDeltaChunkedKDim + 1, VDim: 8}
	if err := g.k.GatedDeltaRuleChunked(g.s, 0, 0, 8, 0, 0, 0, 0, 0, 0, big); err == nil {
		t.Errorf("a key head of %d values launched", big.KDim)
	}
}

// BenchmarkGatedDeltaRule: one prefill batch of the qwen3next-80b-a3b layer shape (16 key and
// 32 value heads of 128), token by token and chunked.
func BenchmarkGatedDeltaRule(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(53, 54))
	d := cuda.DeltaShape{Tokens: 512, KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, Grouped: true}
	qk, v, alpha, beta, vStride := deltaInputs(r, d)
	dqk, dv, dal, dbe := upload(b, g, qk), upload(b, g, v), upload(b, g, alpha), upload(b, g, beta)
	a := randFloats(r, d.VHeads, 1)
	for i := range a {
		a[i] = -float32(math.Exp(float64(a[i])))
	}
	ddt, da := upload(b, g, randFloats(r, d.VHeads, 1)), upload(b, g, a)
	ds := upload(b, g, make([]float32, d.VHeads*d.KDim*d.VDim))
	dout := g.buf(b, 4*d.Tokens*d.VHeads*d.VDim)
	for _, kernel := range []struct {
		name string
		run  func(*cuda.Stream, cuda.DevicePtr, cuda.DevicePtr, int, cuda.DevicePtr, cuda.DevicePtr, cuda.DevicePtr, cuda.DevicePtr, cuda.DevicePtr, cuda.DevicePtr, cuda.DeltaShape) error
	}{{"sequential", g.k.GatedDeltaRule}, {"chunked", g.k.GatedDeltaRuleChunked}} {
		b.Run(kernel.name, func(b *testing.B) {
			per := timeLaunches(b, g, func(int) error {
				return kernel.run(g.s, dqk, dv, vStride, dal, dbe, ddt, da, ds, dout, d)
			})
			b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
			b.ReportMetric(float64(d.Tokens)/per.Seconds(), "tokens/s")
		})
	}
}

// TestGatedRMSNorm: rows of an odd size, in place and into another buffer.
func TestGatedRMSNorm(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(49, 50))
	for _, dim := range []int{45, 300} {
		const rows, eps = 7, 1e-6
		x, z, w := randFloats(r, rows*dim, 2), randFloats(r, rows*dim, 4), randFloats(r, dim, 1)
		want := make([]float64, rows*dim)
		for rr := range rows {
			var ss float64
			for _, v := range x[rr*dim : (rr+1)*dim] {
				ss += float64(v) * float64(v)
			}
			f := 1 / math.Sqrt(ss/float64(dim)+eps)
			for i := range dim {
				zz := float64(z[rr*dim+i])
				want[rr*dim+i] = float64(x[rr*dim+i]) * f * float64(w[i]) * zz * sigmoid64(zz)
			}
		}
		dx, dz, dw := upload(t, g, x), upload(t, g, z), upload(t, g, w)
		dy := g.buf(t, 4*rows*dim)
		for _, out := range []cuda.DevicePtr{dy, dx} {
			if err := g.k.GatedRMSNorm(g.s, dx, dz, dw, out, rows, dim, eps); err != nil {
				t.Fatal(err)
			}
			within(t, "gated rms norm", download[float32](t, g, out, rows*dim), want, 1e-5)
		}
	}
}
