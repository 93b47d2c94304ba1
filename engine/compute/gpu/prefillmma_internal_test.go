package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/compute"
)

// mmaSwitchCase is a head size and cache type for TestPrefillAttentionMMA and
// TestDecodeAttentionMMA, and whether turning the switch off changes the kernel.
type mmaSwitchCase struct {
	hd   int
	typ  string
	uses bool // the MMA kernel runs
}

// attentionStep is a call of Backend.Attention: n queries from position pos0.
type attentionStep struct{ pos0, n int }

// TestPrefillAttentionMMA runs a batch's attention through Backend.Attention with the
// tensor-core kernels on and off (prefillMMA, what STRATA_PREFILL_MMA=0 turns off) over the
// same cache: two prompt chunks (the second wrapping a ring layer's slots), a full layer and a
// sliding-window one. Where an MMA kernel runs (f16 or int8 cache, head size up to 128) the
// outputs agree within 3e-3 (q and P, and an int8 cache's dequantised K and V, go through f16
// there: cuda's mmaPrefillTol) and differ by more than 1e-6, so the switch does pick
// another kernel; where none does (head sizes over 128) they agree within 1e-6 (see below). The int8 cases
// take head sizes with blocks of 32 values (64, 128) and one block a row (80).
func TestPrefillAttentionMMA(t *testing.T) {
	b := newForTest(t)
	testAttentionSwitch(t, b, []mmaSwitchCase{{64, "f16", true}, {128, "f16", true}, {80, "f16", true}, {144, "f16", false}, {256, "f16", false},
		{64, "int8", true}, {128, "int8", true}, {80, "int8", true}, {144, "int8", false}},
		nil, []attentionStep{{0, 100}, {100, 70}}, func(on bool) { b.prefillMMA = on })
}

// TestDecodeAttentionMMA is TestPrefillAttentionMMA for decode steps (one query) after 150
// stored positions (the window layer's reads wrap its ring), with decodeMMA
// (STRATA_DECODE_MMA) as the switch: head sizes up to 128 and 256 (the wide kernel) take the
// tensor-core kernels, 144 keeps attention_decode.
func TestDecodeAttentionMMA(t *testing.T) {
	b := newForTest(t)
	testAttentionSwitch(t, b, []mmaSwitchCase{{128, "f16", true}, {256, "f16", true}, {144, "f16", false}, {128, "int8", true}, {256, "int8", true}},
		[]attentionStep{{0, 100}, {100, 50}}, []attentionStep{{150, 1}, {151, 1}}, func(on bool) { b.decodeMMA = on })
}

// testAttentionSwitch stores fill's random positions, then for each step stores its n and runs
// its attention with the switch set on and off, on a full layer and a sliding-window one
// whose ring the steps wrap, the outputs compared as TestPrefillAttentionMMA says.
func testAttentionSwitch(t *testing.T, b *Backend, cases []mmaSwitchCase, fill, steps []attentionStep, set func(on bool)) {
	r := rand.New(rand.NewPCG(5, 6))
	const heads, kvHeads, window, ring, positions = 8, 2, 40, 140, 300
	for _, c := range cases {
		t.Run(fmt.Sprintf("hd=%d/%s", c.hd, c.typ), func(t *testing.T) {
			cache, err := b.NewKV(compute.KVSpec{Layers: 2, KVHeads: kvHeads, HeadDim: c.hd, Positions: positions, Type: c.typ, Keep: []int{0, ring}})
			if err != nil {
				t.Fatal(err)
			}
			const rows = 100 // the most positions a step or fill takes
			row, qrow := kvHeads*c.hd, heads*c.hd
			kb, vb, qb := b.NewBuf(rows*row), b.NewBuf(rows*row), b.NewBuf(rows*qrow)
			out := b.NewBuf(rows * qrow)
			rnd := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r.Float64()*2 - 1)
				}
				return v
			}
			for _, st := range fill {
				b.Write(kb, rnd(st.n*row))
				b.Write(vb, rnd(st.n*row))
				for layer := range 2 {
					b.StoreKV(cache, layer, st.pos0, st.n, kb, vb)
				}
			}
			for _, st := range steps {
				b.Write(kb, rnd(st.n*row))
				b.Write(vb, rnd(st.n*row))
				b.Write(qb, rnd(st.n*qrow))
				for layer, win := range []int{0, window} {
					b.StoreKV(cache, layer, st.pos0, st.n, kb, vb)
					spec := compute.AttentionSpec{Layer: layer, Pos0: st.pos0, N: st.n, Heads: heads, KVHeads: kvHeads, HeadDim: c.hd,
						Scale: float32(1 / math.Sqrt(float64(c.hd))), Window: win}
					var got [2][]float32
					for i, mma := range []bool{true, false} {
						set(mma)
						b.Attention(out, qb, cache, spec)
						got[i] = make([]float32, st.n*qrow)
						b.Read(out, got[i])
						if err := b.Err(); err != nil {
							t.Fatal(err)
						}
					}
					set(true)
					worst := 0.0
					for i := range got[0] {
						d := math.Abs(float64(got[0][i] - got[1][i]))
						if !(d <= 3e-3) {
							t.Fatalf("step at %d, layer %d: out[%d] = %g with the MMA kernel, %g without", st.pos0, layer, i, got[0][i], got[1][i])
						}
						worst = max(worst, d)
					}
					// The tensor-core kernels round q and P to f16: their outputs move by 1e-5
					// of the outputs' scale and more. attention_decode sums its warps' rows with
					// shared-memory atomics, so two runs of it may differ in the last bits (2e-8
					// seen on the H200): a kernel that is the same both times stays under 1e-6.
					differ := worst > 1e-6
					t.Logf("step at %d, layer %d (window %d): max |Δ| %.2g", st.pos0, layer, win, worst)
					if differ != c.uses {
						t.Errorf("step at %d, layer %d: outputs with and without the switch differ: %v, want %v", st.pos0, layer, differ, c.uses)
					}
				}
			}
		})
	}
}
