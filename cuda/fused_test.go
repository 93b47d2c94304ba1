package cuda_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"strata/cuda"
)

// TestRMSNormQ8: the fused norm gives RMSNorm's values (a float64 reference, and rms_norm
// bit for bit) and their 8-bit copy as quantize_q8 makes it (a Go reference of the format,
// and quantize_q8 byte for byte), with and without a weight, in place and not, and with a
// residual sum first (add_f32's, bit for bit).
func TestRMSNormQ8(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, sh := range []struct {
		rows, dim            int
		weight, inPlace, add bool
	}{{1, 2048, true, false, false}, {1, 2048, true, false, true}, {3, 4096, true, true, false}, {2, 96, false, false, true},
		{1, 8192, true, false, false}, {4, 2880, true, false, true}, {1, 32, true, true, false},
		{1, 160, true, false, true}, {2, 256, false, true, false}, {1, 4128, true, false, true}} {
		const eps = 1e-6
		n := sh.rows * sh.dim
		x := randFloats(r, n, 3)
		res := randFloats(r, n, 2)
		x[0] = 0 // a zero and a group of zeros: scale 0, all q 0
		if sh.dim >= 64 {
			clear(x[32:64])
		}
		w := randFloats(r, sh.dim, 1)
		dw := upload(t, g, w)
		if !sh.weight {
			dw = 0
		}
		rb := cuda.Q8RowBytes(sh.dim)
		dx := upload(t, g, x)
		dy := dx
		if !sh.inPlace {
			dy = g.buf(t, 4*n)
		}
		dq := g.buf(t, sh.rows*rb)
		dadd, ux := cuda.DevicePtr(0), upload(t, g, x)
		if sh.add {
			dadd = upload(t, g, res)
			if err := g.k.Add(g.s, ux, dadd, ux, n); err != nil {
				t.Fatal(err)
			}
			for i := range x {
				x[i] += res[i] // the reference's input is the sum
			}
		}
		if err := g.k.RMSNormQ8(g.s, dx, dadd, dw, dy, dq, sh.rows, sh.dim, eps); err != nil {
			t.Fatal(err)
		}
		y := download[float32](t, g, dy, n)
		yq := download[byte](t, g, dq, sh.rows*rb)
		if sh.add {
			if sum, want := download[float32](t, g, dx, n), download[float32](t, g, ux, n); !slices.Equal(sum, want) {
				t.Errorf("rows=%d dim=%d: the residual sum written back differs from add_f32's", sh.rows, sh.dim)
			}
		}

		// The unfused kernels on the same input.
		if err := g.k.RMSNorm(g.s, ux, dw, ux, sh.rows, sh.dim, eps); err != nil {
			t.Fatal(err)
		}
		uq := g.buf(t, sh.rows*rb)
		if err := g.k.QuantizeQ8(g.s, ux, uq, sh.rows, sh.dim); err != nil {
			t.Fatal(err)
		}
		if uy := download[float32](t, g, ux, n); !slices.Equal(y, uy) {
			t.Errorf("rows=%d dim=%d: values differ from rms_norm's", sh.rows, sh.dim)
		}
		for row := range sh.rows { // the padding after the scales is not written
			a, b := yq[row*rb:row*rb+sh.dim+sh.dim/8], download[byte](t, g, uq, sh.rows*rb)[row*rb:row*rb+sh.dim+sh.dim/8]
			if !bytes.Equal(a, b) {
				t.Errorf("rows=%d dim=%d: row %d's 8-bit copy differs from quantize_q8's", sh.rows, sh.dim, row)
			}
		}

		for i := range sh.rows {
			xr, yr, qr := x[i*sh.dim:(i+1)*sh.dim], y[i*sh.dim:(i+1)*sh.dim], yq[i*rb:(i+1)*rb]
			ss := 0.0
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			sc := 1 / math.Sqrt(ss/float64(sh.dim)+eps)
			for j := range sh.dim {
				want := float64(xr[j]) * sc
				if sh.weight {
					want *= float64(w[j])
				}
				if d := math.Abs(float64(yr[j]) - want); d > 1e-5*(math.Abs(want)+1) || math.IsNaN(float64(yr[j])) {
					t.Fatalf("rows=%d dim=%d: y[%d][%d] = %g want %g", sh.rows, sh.dim, i, j, yr[j], want)
				}
			}
			for grp := range sh.dim / 32 {
				d := math.Float32frombits(binary.LittleEndian.Uint32(qr[sh.dim+4*grp:]))
				amax := 0.0
				for _, v := range yr[grp*32 : grp*32+32] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				if math.Abs(float64(d)-amax/127) > 1e-6*amax {
					t.Fatalf("rows=%d dim=%d: row %d group %d: scale %g, want max|y|/127 = %g", sh.rows, sh.dim, i, grp, d, amax/127)
				}
				for k := range 32 {
					v := float64(int8(qr[grp*32+k])) * float64(d)
					if math.Abs(v-float64(yr[grp*32+k])) > float64(d)/2*1.0001 {
						t.Fatalf("rows=%d dim=%d: row %d value %d: %g quantised to %g (scale %g)", sh.rows, sh.dim, i, grp*32+k, yr[grp*32+k], v, d)
					}
				}
			}
		}
	}
	for _, dim := range []int{0, 17, 8224} {
		if err := g.k.RMSNormQ8(g.s, 0, 0, 0, 0, 0, 1, dim, 1e-6); err == nil || cuda.RMSNormQ8Fits(dim) {
			t.Errorf("dim %d: no error (fits %v)", dim, cuda.RMSNormQ8Fits(dim))
		}
	}
}

// TestQKNormRope: the fused q/k norm and rotation against a float64 reference (RMSNorm per
// head by its weight, then NeoX RoPE with a float32 angle) and against rms_norm then
// rope_neox; with a KV store, the caches hold what kv_write writes of the results (a ring
// of slots, and the whole cache).
func TestQKNormRope(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(33, 34))
	for _, sh := range []struct{ heads, kvHeads, hd, rd, ring int }{{32, 4, 128, 128, 0}, {8, 2, 64, 32, 11}, {4, 1, 256, 256, 0}, {6, 3, 80, 80, 0}} {
		const eps, base = 1e-6, float32(1e6)
		const slots = 4096
		pos := []int32{0, 9, 4095}
		nq, nk := len(pos)*sh.heads*sh.hd, len(pos)*sh.kvHeads*sh.hd
		q, k, v := randFloats(r, nq, 2), randFloats(r, nk, 2), randFloats(r, nk, 2)
		qw, kw := randFloats(r, sh.hd, 1.5), randFloats(r, sh.hd, 1.5)
		dq, dk, dv, dqw, dkw, dpos := upload(t, g, q), upload(t, g, k), upload(t, g, v), upload(t, g, qw), upload(t, g, kw), upload(t, g, pos)
		row := sh.kvHeads * sh.hd
		st := cuda.KVStore{V: dv, KCache: g.buf(t, 2*slots*row), VCache: g.buf(t, 2*slots*row), Ring: sh.ring}
		if err := g.k.QKNormRope(g.s, dq, dk, dqw, dkw, dpos, len(pos), sh.heads, sh.kvHeads, sh.hd, sh.rd, base, eps, st); err != nil {
			t.Fatal(err)
		}
		gq, gk := download[float32](t, g, dq, nq), download[float32](t, g, dk, nk)
		// kv_write of the results into fresh caches: the same bytes at the written slots.
		refK, refV := g.buf(t, 2*slots*row), g.buf(t, 2*slots*row)
		for _, c := range [2][2]cuda.DevicePtr{{dk, refK}, {dv, refV}} {
			if err := g.k.KVWrite(g.s, c[0], c[1], dpos, len(pos), row, sh.ring); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range [2][2]cuda.DevicePtr{{st.KCache, refK}, {st.VCache, refV}} {
			got, want := download[uint16](t, g, c[0], slots*row), download[uint16](t, g, c[1], slots*row)
			for _, p := range pos {
				slot := int(p)
				if sh.ring > 0 {
					slot %= sh.ring
				}
				if !slices.Equal(got[slot*row:(slot+1)*row], want[slot*row:(slot+1)*row]) {
					t.Errorf("heads %d ring %d: cache slot %d differs from kv_write's", sh.heads, sh.ring, slot)
				}
			}
		}

		// The unfused kernels.
		uq, uk := upload(t, g, q), upload(t, g, k)
		for _, u := range []struct {
			p     cuda.DevicePtr
			w     cuda.DevicePtr
			heads int
		}{{uq, dqw, sh.heads}, {uk, dkw, sh.kvHeads}} {
			if err := g.k.RMSNorm(g.s, u.p, u.w, u.p, len(pos)*u.heads, sh.hd, eps); err != nil {
				t.Fatal(err)
			}
			if err := g.k.RopeNeoX(g.s, u.p, dpos, len(pos), u.heads, sh.hd, sh.rd, base); err != nil {
				t.Fatal(err)
			}
		}
		wq, wk := download[float32](t, g, uq, nq), download[float32](t, g, uk, nk)
		if d := maxDiff(gq, wq); d > 1e-6 {
			t.Errorf("heads %d hd %d: q differs from rms_norm + rope_neox by %g", sh.heads, sh.hd, d)
		}
		if d := maxDiff(gk, wk); d > 1e-6 {
			t.Errorf("kv heads %d hd %d: k differs from rms_norm + rope_neox by %g", sh.kvHeads, sh.hd, d)
		}

		half := sh.rd / 2
		for _, c := range []struct {
			name      string
			x, got, w []float32
			heads     int
		}{{"q", q, gq, qw, sh.heads}, {"k", k, gk, kw, sh.kvHeads}} {
			for tk, p := range pos {
				for h := range c.heads {
					off := (tk*c.heads + h) * sh.hd
					ss := 0.0
					for _, v := range c.x[off : off+sh.hd] {
						ss += float64(v) * float64(v)
					}
					sc := 1 / math.Sqrt(ss/float64(sh.hd)+eps)
					normed := func(i int) float64 { return float64(c.x[off+i]) * sc * float64(c.w[i]) }
					for i := range sh.hd {
						want := normed(i)
						if i < sh.rd {
							j := i % half
							inv := float32(1 / math.Pow(float64(base), float64(2*j)/float64(sh.rd)))
							th := float64(float32(p) * inv)
							a, b := normed(j), normed(j+half)
							if i < half {
								want = a*math.Cos(th) - b*math.Sin(th)
							} else {
								want = a*math.Sin(th) + b*math.Cos(th)
							}
						}
						if d := math.Abs(float64(c.got[off+i]) - want); d > 2e-3 || math.IsNaN(float64(c.got[off+i])) {
							t.Fatalf("%s hd=%d rd=%d pos %d head %d dim %d: got %g want %g", c.name, sh.hd, sh.rd, p, h, i, c.got[off+i], want)
						}
					}
				}
			}
		}
	}
	if err := g.k.QKNormRope(g.s, 0, 0, 0, 0, 0, 1, 4, 2, 64, 63, 1e4, 1e-6, cuda.KVStore{}); err == nil {
		t.Error("an odd rope_dim: no error")
	}
	if err := g.k.QKNormRope(g.s, 0, 0, 0, 0, 0, 1, 4, 2, 64, 64, 1e4, 1e-6, cuda.KVStore{KCache: 1}); err == nil {
		t.Error("a store without v and the v cache: no error")
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		if math.IsNaN(float64(a[i])) != math.IsNaN(float64(b[i])) {
			return math.Inf(1)
		}
	}
	return d
}
