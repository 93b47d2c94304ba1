package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/kv"
)

// TestInt8KVHoldsWhatCPUCacheHolds stores the same keys and values (a prompt batch, then
// single tokens, past the end of a ring layer) into the GPU's int8 cache and into engine/kv's,
// and compares every value and scale bit for bit: both backends hold the same numbers, so the
// cache format is one whatever runs it. Head sizes with blocks of 32 and with one block a row.
func TestInt8KVHoldsWhatCPUCacheHolds(t *testing.T) {
	b := newForTest(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, hd := range []int{128, 48} {
		t.Run(fmt.Sprintf("hd=%d", hd), func(t *testing.T) {
			const layers, kvHeads, positions, ring = 2, 3, 24, 9
			keep := []int{0, ring}
			spec := compute.KVSpec{Layers: layers, KVHeads: kvHeads, HeadDim: hd, Positions: positions, Type: "int8", Keep: keep}
			gc, err := b.NewKV(spec)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := kv.NewKept(layers, kvHeads, hd, positions, kv.Int8, keep)
			if err != nil {
				t.Fatal(err)
			}
			row := kvHeads * hd
			kb, vb := b.NewBuf(7*row), b.NewBuf(7*row)
			for pos := 0; pos < 15; {
				n := 1
				if pos == 0 {
					n = 7
				}
				k, v := randScaled(r, n*row), randScaled(r, n*row)
				b.Write(kb, k)
				b.Write(vb, v)
				for l := range layers {
					b.StoreKV(gc, l, pos, n, kb, vb)
					cc.Store(l, pos, n, k, v)
				}
				pos += n
			}
			b.step.brk()
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			g := gc.(*KV)
			block := kv.BlockSize(hd)
			if cuda.Int8KVBlock(hd) != block {
				t.Fatalf("the kernels' block for head size %d is %d, engine/kv's %d", hd, cuda.Int8KVBlock(hd), block)
			}
			for l := range layers {
				slots := cc.Kept(l)
				for _, side := range []struct {
					name   string
					vals   cuda.DevicePtr
					scales cuda.DevicePtr
					want8  []int8
					wants  []float32
				}{{"keys", g.k[l], g.ks[l], cc.Keys8(l), cc.KeyScales(l)}, {"values", g.v[l], g.vs[l], cc.Values8(l), cc.ValueScales(l)}} {
					got8 := make([]int8, slots*row)
					gots := make([]float32, slots*row/block)
					if err := cuda.Download(b.s, got8, side.vals); err != nil {
						t.Fatal(err)
					}
					if err := cuda.Download(b.s, gots, side.scales); err != nil {
						t.Fatal(err)
					}
					for p := max(0, 15-slots); p < 15; p++ {
						s := cc.Slot(l, p)
						for h := range kvHeads {
							cpu := cc.HeadOffset(l, h) + s*hd // [head][slot][dim]
							gpu := (s*kvHeads + h) * hd       // [slot][head][dim]
							for i := range hd {
								if got8[gpu+i] != side.want8[cpu+i] {
									t.Fatalf("layer %d %s position %d head %d value %d: GPU %d, CPU %d", l, side.name, p, h, i, got8[gpu+i], side.want8[cpu+i])
								}
							}
							for j := range hd / block {
								if g, w := gots[gpu/block+j], side.wants[cpu/block+j]; math.Float32bits(g) != math.Float32bits(w) {
									t.Fatalf("layer %d %s position %d head %d scale %d: GPU %g, CPU %g", l, side.name, p, h, j, g, w)
								}
							}
						}
					}
				}
			}
		})
	}
}

// randScaled is random values whose size varies from block to block, as keys' channels do.
func randScaled(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r.Float64()*2 - 1) * math.Exp2(float64(i/16%7-3)))
	}
	return v
}
