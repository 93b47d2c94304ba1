package cuda_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"strata/cuda"
)

// TestRopeTableStore: the fused rotation and cache store gives rope_table's q and k (within
// a float's rounding) and caches that hold exactly the f16 of its k and of v at the written
// slots, over a partial rotation (values past 2*half stay) and a ring.
func TestRopeTableStore(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(37, 38))
	for _, sh := range []struct{ heads, kvHeads, hd, half, ring int }{{8, 2, 64, 32, 0}, {4, 1, 48, 20, 11}, {64, 8, 64, 32, 0}} {
		const scale, slots = 1.3, 4096
		pos := []int32{0, 17, 4000}
		tokens := len(pos)
		nq, nk := tokens*sh.heads*sh.hd, tokens*sh.kvHeads*sh.hd
		q, k, v := randFloats(r, nq, 1), randFloats(r, nk, 1), randFloats(r, nk, 1)
		inv := randFloats(r, sh.half, 1)
		for i := range inv {
			inv[i] = float32(math.Abs(float64(inv[i])))
		}
		dq, dk, dv, dp, di := upload(t, g, q), upload(t, g, k), upload(t, g, v), upload(t, g, pos), upload(t, g, inv)
		row := sh.kvHeads * sh.hd
		st := cuda.KVStore{V: dv, KCache: g.buf(t, 2*slots*row), VCache: g.buf(t, 2*slots*row), Ring: sh.ring}
		if err := g.k.RopeTableStore(g.s, dq, dk, dp, di, tokens, sh.heads, sh.kvHeads, sh.hd, sh.half, scale, st); err != nil {
			t.Fatal(err)
		}
		gq, gk := download[float32](t, g, dq, nq), download[float32](t, g, dk, nk)
		uq, uk := upload(t, g, q), upload(t, g, k)
		for _, u := range []struct {
			p     cuda.DevicePtr
			heads int
		}{{uq, sh.heads}, {uk, sh.kvHeads}} {
			if err := g.k.RopeTable(g.s, u.p, dp, di, tokens, u.heads, sh.hd, sh.half, scale); err != nil {
				t.Fatal(err)
			}
		}
		if d := maxDiff(gq, download[float32](t, g, uq, nq)); d > 1e-6 {
			t.Errorf("heads %d: q differs from rope_table's by %g", sh.heads, d)
		}
		if d := maxDiff(gk, download[float32](t, g, uk, nk)); d > 1e-6 {
			t.Errorf("kv heads %d: k differs from rope_table's by %g", sh.kvHeads, d)
		}
		kc, vc := download[uint16](t, g, st.KCache, slots*row), download[uint16](t, g, st.VCache, slots*row)
		for tk, p := range pos {
			slot := int(p)
			if sh.ring > 0 {
				slot %= sh.ring
			}
			if want := toF16(gk[tk*row : (tk+1)*row]); !slices.Equal(kc[slot*row:(slot+1)*row], want) {
				t.Errorf("ring %d: k cache slot %d is not the f16 of the rotated k", sh.ring, slot)
			}
			if want := toF16(v[tk*row : (tk+1)*row]); !slices.Equal(vc[slot*row:(slot+1)*row], want) {
				t.Errorf("ring %d: v cache slot %d is not the f16 of v", sh.ring, slot)
			}
		}
	}
	if err := g.k.RopeTableStore(g.s, 0, 0, 0, 0, 1, 4, 2, 64, 32, 1, cuda.KVStore{}); err == nil {
		t.Error("no caches: no error")
	}
}
