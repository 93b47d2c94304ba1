package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/compute"
)

// TestPrefillAttentionMMA runs a batch's attention through Backend.Attention with the
// tensor-core kernels on and off (prefillMMA, what STRATA_PREFILL_MMA=0 turns off) over the
// same cache: two prompt chunks (the second wrapping a ring layer's slots), a full layer and a
// sliding-window one. Where an MMA kernel runs (f16 or int8 cache, head size up to 128) the
// outputs agree within 3e-3 (q and P, and an int8 cache's dequantised K and V, go through f16
// there: cuda's mmaPrefillTol) and are not bit for bit the same, so the switch does pick
// another kernel; where none does (head sizes over 128) they are identical. The int8 cases
// take head sizes with blocks of 32 values (64, 128) and one block a row (80).
func TestPrefillAttentionMMA(t *testing.T) {
	b := newForTest(t)
	r := rand.New(rand.NewPCG(5, 6))
	const heads, kvHeads, window, ring, positions = 8, 2, 40, 140, 300
	chunks := []struct{ pos0, n int }{{0, 100}, {100, 70}}
	for _, c := range []struct {
		hd   int
		typ  string
		uses bool // the MMA kernel runs
	}{{64, "f16", true}, {128, "f16", true}, {80, "f16", true}, {144, "f16", false}, {256, "f16", false},
		{64, "int8", true}, {128, "int8", true}, {80, "int8", true}, {144, "int8", false}} {
		t.Run(fmt.Sprintf("hd=%d/%s", c.hd, c.typ), func(t *testing.T) {
			cache, err := b.NewKV(compute.KVSpec{Layers: 2, KVHeads: kvHeads, HeadDim: c.hd, Positions: positions, Type: c.typ, Keep: []int{0, ring}})
			if err != nil {
				t.Fatal(err)
			}
			row, qrow := kvHeads*c.hd, heads*c.hd
			kb, vb, qb := b.NewBuf(100*row), b.NewBuf(100*row), b.NewBuf(100*qrow)
			out := b.NewBuf(100 * qrow)
			rnd := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r.Float64()*2 - 1)
				}
				return v
			}
			for _, ch := range chunks {
				b.Write(kb, rnd(ch.n*row))
				b.Write(vb, rnd(ch.n*row))
				b.Write(qb, rnd(ch.n*qrow))
				for layer, win := range []int{0, window} {
					b.StoreKV(cache, layer, ch.pos0, ch.n, kb, vb)
					spec := compute.AttentionSpec{Layer: layer, Pos0: ch.pos0, N: ch.n, Heads: heads, KVHeads: kvHeads, HeadDim: c.hd,
						Scale: float32(1 / math.Sqrt(float64(c.hd))), Window: win}
					var got [2][]float32
					for i, mma := range []bool{true, false} {
						b.prefillMMA = mma
						b.Attention(out, qb, cache, spec)
						got[i] = make([]float32, ch.n*qrow)
						b.Read(out, got[i])
						if err := b.Err(); err != nil {
							t.Fatal(err)
						}
					}
					worst, differ := 0.0, false
					for i := range got[0] {
						d := math.Abs(float64(got[0][i] - got[1][i]))
						if !(d <= 3e-3) {
							t.Fatalf("chunk at %d, layer %d: out[%d] = %g with the MMA kernel, %g without", ch.pos0, layer, i, got[0][i], got[1][i])
						}
						worst = max(worst, d)
						differ = differ || got[0][i] != got[1][i]
					}
					t.Logf("chunk at %d, layer %d (window %d): max |Δ| %.2g", ch.pos0, layer, win, worst)
					if differ != c.uses {
						t.Errorf("chunk at %d, layer %d: outputs with and without prefillMMA differ: %v, want %v", ch.pos0, layer, differ, c.uses)
					}
				}
			}
		})
	}
}
