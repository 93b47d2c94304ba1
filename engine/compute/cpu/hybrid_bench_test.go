package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"strata/engine/compute"
)

// BenchmarkGatedDeltaNet: one qwen3next-80b-a3b-shaped Gated DeltaNet layer (16 key heads, 32
// value heads of 128) over one decode token and a 512-token prompt: the conv and the delta
// rule, the part of a hybrid layer that is not a matrix product.
func BenchmarkGatedDeltaNet(b *testing.B) {
	be := New(Options{})
	defer be.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	s := compute.DeltaSpec{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, Scale: 0.088}
	vh := make([]float32, s.VHeads)
	for i := range vh {
		vh[i] = -0.5
	}
	t := &testing.T{}
	s.DtBias, s.A = f32Weight(t, "dt", 1, s.VHeads, make([]float32, s.VHeads)), f32Weight(t, "a", 1, s.VHeads, vh)
	C := s.Channels()
	conv := f32Weight(t, "conv", C, 4, randoms(rng, C*4, 0.5))
	for _, n := range []int{1, 512} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s.N = n
			qkv, out := buf(randoms(rng, n*C, 1)), be.NewBuf(n*C)
			alpha, beta := buf(randoms(rng, n*s.VHeads, 1)), buf(randoms(rng, n*s.VHeads, 1))
			convState, state, dst := be.NewBuf(3*C), be.NewBuf(s.StateLen()), be.NewBuf(n*s.VHeads*s.VDim)
			b.ResetTimer()
			for range b.N {
				be.CausalConv1D(out, qkv, convState, conv, n)
				be.SiLU(out, n*C)
				be.GatedDeltaNet(dst, out, alpha, beta, state, s)
			}
			if err := be.Err(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
