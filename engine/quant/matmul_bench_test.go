package quant

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"strata/engine/parallel"
)

// Memory bandwidth and matrix-vector throughput, in GB/s of weight bytes read, so the two
// can be compared in one run:
//
//	go test -run '^$' -bench 'MatMulCopy|MatVec' ./engine/quant/
//
// "cache" is one 4096x4096 matrix (a few MB, partly cache resident); "dram" cycles over
// copies of it totalling at least 1 GiB, so every call reads from memory even on servers
// with a few hundred MB of L3.

const vdBenchDim = 4096

// vdBenchBytes is the DRAM working set of the products; the copy moves half of it.
const vdBenchBytes = 1 << 30

func vdBenchPools(b *testing.B) []*parallel.Pool {
	one, all := parallel.NewPool(1), parallel.NewPool(runtime.NumCPU())
	b.Cleanup(func() { one.Close(); all.Close() })
	return []*parallel.Pool{one, all}
}

// BenchmarkMatMulCopy copies a 512 MiB buffer; GB/s counts the bytes read plus written
// (STREAM's convention), read-GB/s the bytes read only.
func BenchmarkMatMulCopy(b *testing.B) {
	const size = vdBenchBytes / 2
	src := make([]byte, size)
	dst := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in before timing
	for _, p := range vdBenchPools(b) {
		b.Run(fmt.Sprintf("threads=%d", p.Size()), func(b *testing.B) {
			chunks := p.Size() * 16
			per := size / chunks
			for b.Loop() {
				p.For(chunks, 1, func(lo, hi int) {
					copy(dst[lo*per:hi*per], src[lo*per:hi*per])
				})
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(2*size/sec/1e9, "GB/s")
			b.ReportMetric(size/sec/1e9, "read-GB/s")
		})
	}
}

func vdBenchTypes() []Type {
	return []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, F16, BF16, F32, IQ2_XXS}
}

// BenchmarkMatVec runs a 4096x4096 product per type, on one thread and on all, for n = 1,
// 8 and 64 activation rows, and for n = 1 over a DRAM-sized set of matrices.
func BenchmarkMatVec(b *testing.B) {
	pools := vdBenchPools(b)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, wt := range vdBenchTypes() {
		w := vdRandomRows(wt, vdBenchDim, vdBenchDim, rng)
		if wt == IQ2_XXS { // random bytes are fine: the fallback only needs finite scales
			for k := 0; k < len(w); k += wt.BlockBytes() {
				w[k], w[k+1] = 0x00, 0x20 // fp16 0.0078
			}
		}
		size := len(w)
		var dram [][]byte // copies of w totalling >= vdBenchBytes
		if wt != IQ2_XXS {
			dram = make([][]byte, (vdBenchBytes+size-1)/size)
			for c := range dram {
				dram[c] = append([]byte(nil), w...)
			}
		}
		for _, n := range []int{1, 8, 64} {
			a, _ := vdRandomActs(b, wt, vdBenchDim, n, rng)
			y := make([]float32, n*vdBenchDim)
			for _, p := range pools {
				run := func(mats [][]byte) func(b *testing.B) {
					return func(b *testing.B) {
						b.SetBytes(int64(size))
						k := 0
						for b.Loop() {
							if err := MatMulParallel(p, wt, mats[k], vdBenchDim, vdBenchDim, a, y, vdBenchDim); err != nil {
								b.Fatal(err)
							}
							k = (k + 1) % len(mats)
						}
						b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
					}
				}
				name := fmt.Sprintf("%s/n=%d/threads=%d", wt, n, p.Size())
				b.Run(name+"/cache", run([][]byte{w}))
				if n == 1 && dram != nil {
					b.Run(name+"/dram", run(dram))
				}
			}
		}
	}
}
