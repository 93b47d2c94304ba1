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

// BenchmarkMatMulRead sums a 512 MiB buffer with all threads: the read bandwidth the
// products can at best reach, beside the copy's.
func BenchmarkMatMulRead(b *testing.B) {
	const size = vdBenchBytes / 2
	buf := make([]uint64, size/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	p := vdBenchPools(b)[1]
	chunks := p.Size() * 16
	per := len(buf) / chunks
	sums := make([]uint64, chunks*8) // one cache line per chunk
	for b.Loop() {
		p.For(chunks, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				var s0, s1, s2, s3 uint64
				part := buf[c*per : (c+1)*per]
				for j := 0; j+3 < len(part); j += 4 {
					s0 += part[j]
					s1 += part[j+1]
					s2 += part[j+2]
					s3 += part[j+3]
				}
				sums[c*8] = s0 + s1 + s2 + s3
			}
		})
	}
	b.ReportMetric(size/(b.Elapsed().Seconds()/float64(b.N))/1e9, "read-GB/s")
}

// BenchmarkMatVecExpert is one expert projection of a Qwen3-30B-A3B-sized MoE layer (768
// rows of 2048 Q4_K values, 0.9 MB) on all threads: small enough that the pool's
// scheduling cost shows beside the arithmetic.
func BenchmarkMatVecExpert(b *testing.B) {
	p := vdBenchPools(b)[1]
	rng := rand.New(rand.NewPCG(13, 14))
	for _, wt := range []Type{Q4_K, Q8_0} {
		b.Run(wt.String(), func(b *testing.B) {
			rows, cols := 768, 2048
			w := vdRandomRows(wt, rows, cols, rng)
			a, _ := vdRandomActs(b, wt, cols, 1, rng)
			y := make([]float32, rows)
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				if err := MatMulParallel(p, wt, w, rows, cols, a, y, rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

func vdBenchTypes() []Type {
	return []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, F16, BF16, F32,
		IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S}
}

// BenchmarkMatVec runs a 4096x4096 product per type, on one thread and on all, for n = 1,
// 8 and 64 activation rows, and for n = 1 over a DRAM-sized set of matrices. Each type's
// data is made inside its sub-benchmark, so a -bench filter skips the others' set-up.
func BenchmarkMatVec(b *testing.B) {
	pools := vdBenchPools(b)
	for _, wt := range vdBenchTypes() {
		b.Run(wt.String(), func(b *testing.B) { vdBenchType(b, wt, pools) })
	}
}

func vdBenchType(b *testing.B, wt Type, pools []*parallel.Pool) {
	rng := rand.New(rand.NewPCG(11, uint64(wt)))
	w := vdRandomRows(wt, vdBenchDim, vdBenchDim, rng)
	size := len(w)
	var dram [][]byte // copies of w totalling >= vdBenchBytes, made on first use
	dramSet := func() [][]byte {
		if dram == nil {
			dram = make([][]byte, (vdBenchBytes+size-1)/size)
			for c := range dram {
				dram[c] = append([]byte(nil), w...)
			}
		}
		return dram
	}
	for _, n := range []int{1, 8, 64} {
		a, _ := vdRandomActs(b, wt, vdBenchDim, n, rng)
		y := make([]float32, n*vdBenchDim)
		for _, p := range pools {
			run := func(mats func() [][]byte) func(b *testing.B) {
				return func(b *testing.B) {
					ms := mats()
					b.SetBytes(int64(size))
					k := 0
					for b.Loop() {
						if err := MatMulParallel(p, wt, ms[k], vdBenchDim, vdBenchDim, a, y, vdBenchDim); err != nil {
							b.Fatal(err)
						}
						k = (k + 1) % len(ms)
					}
					b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				}
			}
			name := fmt.Sprintf("n=%d/threads=%d", n, p.Size())
			b.Run(name+"/cache", run(func() [][]byte { return [][]byte{w} }))
			if n == 1 {
				b.Run(name+"/dram", run(dramSet))
			}
		}
	}
}

// BenchmarkMatMulSet quantises one 4096-value activation row (done once per product input).
func BenchmarkMatMulSet(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, wt := range []Type{Q8_0, Q4_K} {
		b.Run(wt.String(), func(b *testing.B) {
			a, xs := vdRandomActs(b, wt, vdBenchDim, 1, rng)
			b.SetBytes(4 * vdBenchDim)
			for b.Loop() {
				if err := a.Set(0, xs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
