package cpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"strata/engine/compute"
	"strata/engine/quant"
)

// BenchmarkMoE is one Qwen3-30B-A3B-shaped MoE layer (128 experts of 768 x 2048 Q4_K, eight
// routed per token with Zipf-like popularity) on all threads, for decode (one token) and a
// 64-token prefill step:
//
//	go test -run '^$' -bench MoE ./engine/compute/cpu/
//
// The experts (340 MB) live in ordinary memory, so decode reads them from DRAM as it does
// from a cached model file; GB/s counts the expert bytes a token reads.
func BenchmarkMoE(b *testing.B) {
	const hidden, ffn, experts, k = 2048, 768, 128, 8
	rng := rand.New(rand.NewPCG(31, 32))
	be := New(Options{Threads: runtime.NumCPU()})
	b.Cleanup(func() { be.Close() })
	gate := benchWeight(b, "gate", ffn, hidden, experts, rng)
	up := benchWeight(b, "up", ffn, hidden, experts, rng)
	down := benchWeight(b, "down", hidden, ffn, experts, rng)
	perExpert := len(gate.Data())/experts + len(up.Data())/experts + len(down.Data())/experts
	b.Run("n=1/read", func(b *testing.B) { benchReadExperts(b, be, []*Weight{gate, up, down}, experts, k, rng) })
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			sec := benchMoELoop(b, be, gate, up, down, n, hidden, experts, k, rng)
			b.ReportMetric(float64(n)/sec, "tok/s")
			if n == 1 {
				b.ReportMetric(float64(k*perExpert)/sec/1e9, "GB/s")
			}
		})
	}
	// A tiered decode layer's CPU misses: the few routed experts that are neither in VRAM
	// nor read by the GPU (q30b on the H200: two or three a layer).
	for _, misses := range []int{2, 3} {
		b.Run(fmt.Sprintf("n=1/misses=%d", misses), func(b *testing.B) {
			sec := benchMoELoop(b, be, gate, up, down, 1, hidden, experts, misses, rng)
			b.ReportMetric(sec*1e6, "us/layer")
			b.ReportMetric(float64(misses*perExpert)/sec/1e9, "GB/s")
		})
	}
}

// benchMoELoop times be.MoE of n random rows of width hidden through gate, up and down,
// each call routed by the next of 16 routings (cycled, so decode does not reuse cached
// experts), and returns the seconds a call took.
func benchMoELoop(b *testing.B, be *Backend, gate, up, down *Weight, n, hidden, experts, k int, rng *rand.Rand) float64 {
	xs := make([]float32, n*hidden)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	x, dst := be.NewBuf(n*hidden), be.NewBuf(n*hidden)
	be.Write(x, xs)
	routes := make([]*routesT, 16)
	for i := range routes {
		routes[i] = benchRoutes(n, experts, k, rng)
	}
	i := 0
	for b.Loop() {
		be.MoE(dst, x, gate, up, down, nil, routes[i%len(routes)])
		i++
	}
	if err := be.Err(); err != nil {
		b.Fatal(err)
	}
	return b.Elapsed().Seconds() / float64(b.N)
}

// benchReadExperts reads the matrices of one token's routed experts (cycled over 16 routings,
// as n=1 does) on the pool in contiguous pieces, as the products split their rows, but adds
// the bytes instead of multiplying: its GB/s is the pace of memory on n=1's access pattern,
// which n=1's GB/s can at best reach.
func benchReadExperts(b *testing.B, be *Backend, ws []*Weight, experts, k int, rng *rand.Rand) {
	const piece = 16 << 10
	var mats [][][]byte // per routing, the matrices one token reads
	for range 16 {
		var ms [][]byte
		for _, id := range benchRoutes(1, experts, k, rng).IDs {
			for _, w := range ws {
				ms = append(ms, w.ExpertBytes(int(id)))
			}
		}
		mats = append(mats, ms)
	}
	size := len(mats[0][0])
	for _, w := range ws {
		if len(w.ExpertBytes(0)) != size {
			b.Fatalf("%s: %d bytes an expert, want every matrix at %d", w.name, len(w.ExpertBytes(0)), size)
		}
	}
	pieces := (size + piece - 1) / piece
	var sink atomic.Uint64
	i, bytes := 0, 0
	for b.Loop() {
		ms := mats[i%len(mats)]
		be.Pool().For(len(ms)*pieces, 1, func(lo, hi int) {
			var s uint64
			for p := lo; p < hi; p++ {
				m := ms[p/pieces]
				off := (p % pieces) * piece
				s += quant.ReadSum(m[off:min(off+piece, len(m))])
			}
			sink.Add(s)
		})
		for _, m := range ms {
			bytes += len(m)
		}
		i++
	}
	b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// benchWeight makes a stacked Q4_K expert tensor of random blocks with sane scales.
func benchWeight(b testing.TB, name string, rows, cols, exps int, rng *rand.Rand) *Weight {
	return benchWeightOf(b, quant.Q4_K, name, rows, cols, exps, rng)
}

// benchWeightOf is rows x cols x exps random blocks of type t (Q4_K, Q8_0 or MXFP4) whose
// scales keep the values small.
func benchWeightOf(b testing.TB, t quant.Type, name string, rows, cols, exps int, rng *rand.Rand) *Weight {
	rb, err := quant.RowBytes(t, cols)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, rb*rows*exps)
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	for o := 0; o < len(data); o += t.BlockBytes() {
		switch t {
		case quant.Q4_K:
			binary.LittleEndian.PutUint16(data[o:], quant.FP32ToFP16(0.01))
			binary.LittleEndian.PutUint16(data[o+2:], quant.FP32ToFP16(0.005))
		case quant.Q8_0, quant.IQ3_XXS:
			binary.LittleEndian.PutUint16(data[o:], quant.FP32ToFP16(0.01))
		case quant.MXFP4:
			data[o] = 120 // E8M0 exponent: 2^-7
		default:
			b.Fatalf("benchWeightOf: no scales for %s", t)
		}
	}
	w, err := NewWeight(compute.WeightSpec{Name: name, Type: t, Rows: rows, Cols: cols, Experts: exps, Data: data})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkMoETypes compares the expert weight types on one gpt-oss-like MoE layer (32
// experts, four routed; 3072 wide, the nearest to gpt-oss's 2880 that Q4_K's 256-value
// blocks take), decode and a 64-token prefill, on all threads:
//
//	go test -run '^$' -bench MoETypes ./engine/compute/cpu/
//
// GFLOP/s counts 2 per weight and token. On the 2-core VM (2026-12-02), 64 tokens: Q4_K
// 234-247; Q8_0 and MXFP4 130-142 and 119-128 with one weight row against four activation
// rows, medians 168 and 182 with the two-row tiles (VD_ROWS32T in vecdot_kern.h). IQ3_XXS
// (Qwen3-Next's published type): 64 tokens 59 -> 203 tok/s with its tiles (i256_tile),
// decode even (64 and 69 tok/s, medians of 5).
func BenchmarkMoETypes(b *testing.B) {
	const width, experts, k = 3072, 32, 4
	for _, t := range []quant.Type{quant.Q4_K, quant.Q8_0, quant.MXFP4, quant.IQ3_XXS} {
		rng := rand.New(rand.NewPCG(31, 32))
		be := New(Options{Threads: runtime.NumCPU()})
		gate := benchWeightOf(b, t, "gate", width, width, experts, rng)
		up := benchWeightOf(b, t, "up", width, width, experts, rng)
		down := benchWeightOf(b, t, "down", width, width, experts, rng)
		for _, n := range []int{1, 64} {
			b.Run(fmt.Sprintf("%v/n=%d", t, n), func(b *testing.B) {
				sec := benchMoELoop(b, be, gate, up, down, n, width, experts, k, rng)
				b.ReportMetric(float64(n)/sec, "tok/s")
				b.ReportMetric(float64(n*k*3*width*width*2)/sec/1e9, "GFLOP/s")
			})
		}
		be.Close()
	}
}

// routesT is compute.Routes, short for the tests.
type routesT = compute.Routes

// benchRoutes routes n tokens to k distinct experts each, the expert of popularity rank e
// drawn with weight 1/(e+1). The ranks are shuffled over the experts, as a model's (and
// synth's) are, so popular experts do not sit together.
func benchRoutes(n, experts, k int, rng *rand.Rand) *routesT {
	r := &routesT{N: n, K: k, IDs: make([]int32, n*k), Weights: make([]float32, n*k)}
	byRank := rng.Perm(experts)
	var total float64
	for e := range experts {
		total += 1 / float64(e+1)
	}
	for t := range n {
		seen := map[int32]bool{}
		for j := 0; j < k; {
			u, e := rng.Float64()*total, 0
			for ; e < experts-1; e++ {
				if u -= 1 / float64(e+1); u <= 0 {
					break
				}
			}
			id := int32(byRank[e])
			if seen[id] {
				continue
			}
			seen[id] = true
			r.IDs[t*k+j], r.Weights[t*k+j] = id, 1/float32(k)
			j++
		}
	}
	return r
}
