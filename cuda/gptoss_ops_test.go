package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The gpt-oss steps (clamped SwiGLU, biases, RoPE by a table) against float64 references.

func TestSwiGLUClamped(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(31, 32))
	const n, limit, alpha = 1000, 7, 1.702
	gv, uv := randFloats(r, n, 12), randFloats(r, n, 12) // past the limit both ways
	dg, du := upload(t, g, gv), upload(t, g, uv)
	dy := g.buf(t, 4*n)
	if err := g.k.SwiGLUClamped(g.s, dg, du, dy, n, limit, alpha); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, g, dy, n)
	for i := range got {
		a := math.Min(float64(gv[i]), limit)
		b := math.Max(math.Min(float64(uv[i]), limit), -limit)
		want := a / (1 + math.Exp(-alpha*a)) * (b + 1)
		if math.Abs(float64(got[i])-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("[%d] g=%g u=%g: %g want %g", i, gv[i], uv[i], got[i], want)
		}
	}
}

func TestAddBiasAndExpertBias(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(33, 34))
	const rows, cols, experts, stride = 5, 300, 4, 304
	x := randFloats(r, rows*cols, 1)
	bias := randFloats(r, experts*stride, 1)
	ids := []int32{3, 0, 3, 1, 2}
	dx, db, di := upload(t, g, x), upload(t, g, bias), upload(t, g, ids)
	if err := g.k.AddBias(g.s, dx, db, rows, cols); err != nil {
		t.Fatal(err)
	}
	if err := g.k.ExpertBias(g.s, dx, db, di, rows, cols, stride); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, g, dx, rows*cols)
	for rr := range rows {
		for i := range cols {
			want := x[rr*cols+i] + bias[i] + bias[int(ids[rr])*stride+i]
			if math.Abs(float64(got[rr*cols+i]-want)) > 1e-6 {
				t.Fatalf("row %d [%d] = %g want %g", rr, i, got[rr*cols+i], want)
			}
		}
	}
}

func TestRopeTable(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(35, 36))
	const tokens, heads, hd, half, scale = 3, 4, 48, 20, 1.3 // partial: 8 values stay
	x := randFloats(r, tokens*heads*hd, 1)
	inv := randFloats(r, half, 1)
	for i := range inv {
		inv[i] = float32(math.Abs(float64(inv[i])))
	}
	pos := []int32{0, 17, 4000}
	dx, dp, di := upload(t, g, x), upload(t, g, pos), upload(t, g, inv)
	if err := g.k.RopeTable(g.s, dx, dp, di, tokens, heads, hd, half, scale); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, g, dx, len(x))
	for tk := range tokens {
		for h := range heads {
			v := x[(tk*heads+h)*hd : (tk*heads+h+1)*hd]
			o := got[(tk*heads+h)*hd : (tk*heads+h+1)*hd]
			for i := range hd {
				want := float64(v[i])
				if i < 2*half {
					j := i % half
					a := float64(float32(pos[tk]) * inv[j])
					c, s := math.Cos(a)*scale, math.Sin(a)*scale
					if i < half {
						want = float64(v[j])*c - float64(v[j+half])*s
					} else {
						want = float64(v[j+half])*c + float64(v[j])*s
					}
				}
				if math.Abs(float64(o[i])-want) > 1e-5 {
					t.Fatalf("token %d head %d [%d] = %g want %g", tk, h, i, o[i], want)
				}
			}
		}
	}
}
