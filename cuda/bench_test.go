package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"strata/cuda"
)

// timeLaunches returns the device time per launch of launch(i), i in 0..b.N: the b.N
// launches are captured into one CUDA graph and replayed, so the host's per-launch cost
// (about 4.5 us from Go, see BenchmarkLaunch) does not hide short kernels. One direct
// launch warms up first; the best of 3 replays counts.
func timeLaunches(b *testing.B, g *gpu, launch func(i int) error) time.Duration {
	b.Helper()
	start, err := g.ctx.NewEvent(true)
	if err != nil {
		b.Fatal(err)
	}
	defer start.Destroy()
	stop, err := g.ctx.NewEvent(true)
	if err != nil {
		b.Fatal(err)
	}
	defer stop.Destroy()
	if err := launch(0); err != nil {
		b.Fatal(err)
	}
	if err := g.s.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if err := launch(i); err != nil {
			b.Fatal(err)
		}
	}
	gr, err := g.s.EndCapture()
	if err != nil {
		b.Fatal(err)
	}
	defer gr.Destroy()
	if err := gr.Launch(g.s); err != nil { // warm the graph
		b.Fatal(err)
	}
	if err := g.s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	best := time.Duration(math.MaxInt64)
	for rep := 0; rep < 3; rep++ {
		if err := start.Record(g.s); err != nil {
			b.Fatal(err)
		}
		if err := gr.Launch(g.s); err != nil {
			b.Fatal(err)
		}
		if err := stop.Record(g.s); err != nil {
			b.Fatal(err)
		}
		if err := stop.Synchronize(); err != nil {
			b.Fatal(err)
		}
		el, err := stop.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		best = min(best, el)
	}
	return best / time.Duration(b.N)
}

// timeDirect is timeLaunches without the graph: what launching from Go costs.
func timeDirect(b *testing.B, g *gpu, launch func(i int) error) time.Duration {
	b.Helper()
	start, err := g.ctx.NewEvent(true)
	if err != nil {
		b.Fatal(err)
	}
	defer start.Destroy()
	stop, err := g.ctx.NewEvent(true)
	if err != nil {
		b.Fatal(err)
	}
	defer stop.Destroy()
	if err := launch(0); err != nil {
		b.Fatal(err)
	}
	if err := g.s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := start.Record(g.s); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if err := launch(i); err != nil {
			b.Fatal(err)
		}
	}
	if err := stop.Record(g.s); err != nil {
		b.Fatal(err)
	}
	if err := stop.Synchronize(); err != nil {
		b.Fatal(err)
	}
	el, err := stop.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	return el / time.Duration(b.N)
}

// copies uploads raw into enough buffers that cycling through them exceeds the L2 cache.
func copies(b *testing.B, g *gpu, raw []byte) []cuda.DevicePtr {
	n := (512 << 20) / len(raw)
	if n < 2 {
		n = 2
	}
	if n > 64 {
		n = 64
	}
	out := make([]cuda.DevicePtr, n)
	for i := range out {
		out[i] = upload(b, g, raw)
	}
	return out
}

func BenchmarkMatVec(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []cuda.QuantType{cuda.Q4_K, cuda.Q8_0, cuda.Q6_K, cuda.MXFP4, cuda.F16} {
		for _, sh := range []struct{ rows, cols int }{{4096, 4096}, {2048, 2048}, {151936, 2048}} {
			if sh.rows > 100000 && typ != cuda.Q4_K && typ != cuda.Q8_0 {
				continue // the output-projection shape only for the two main types
			}
			b.Run(fmt.Sprintf("%v/%dx%d", typ, sh.rows, sh.cols), func(b *testing.B) {
				raw, _ := makeWeights(b, r, typ, sh.rows, sh.cols)
				ws := copies(b, g, raw)
				x := upload(b, g, randFloats(r, sh.cols, 1))
				y := g.buf(b, 4*sh.rows)
				per := timeLaunches(b, g, func(i int) error {
					return g.k.MatVec(g.s, typ, ws[i%len(ws)], x, y, sh.rows, sh.cols)
				})
				b.ReportMetric(float64(len(raw))/per.Seconds()/1e9, "GB/s")
				b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
			})
		}
	}
}

// BenchmarkMatVecQ8 is BenchmarkMatVec on the 8-bit-activation kernels (the quantisation
// of x, shared by every matrix that reads the same x, is not in the time).
func BenchmarkMatVecQ8(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []cuda.QuantType{cuda.Q4_K, cuda.Q8_0, cuda.Q6_K, cuda.Q5_K, cuda.MXFP4, cuda.IQ4_XS, cuda.Q4_0,
		cuda.Q2_K, cuda.Q3_K, cuda.IQ2_XXS, cuda.IQ2_XS, cuda.IQ2_S, cuda.IQ3_XXS, cuda.IQ3_S} {
		for _, sh := range []struct{ rows, cols int }{{4096, 4096}, {2048, 2048}, {151936, 2048}} {
			if sh.rows > 100000 && typ != cuda.Q4_K && typ != cuda.Q8_0 {
				continue
			}
			b.Run(fmt.Sprintf("%v/%dx%d", typ, sh.rows, sh.cols), func(b *testing.B) {
				raw, _ := makeWeights(b, r, typ, sh.rows, sh.cols)
				ws := copies(b, g, raw)
				x := upload(b, g, randFloats(r, sh.cols, 1))
				xq := g.buf(b, cuda.Q8RowBytes(sh.cols))
				if err := g.k.QuantizeQ8(g.s, x, xq, 1, sh.cols); err != nil {
					b.Fatal(err)
				}
				y := g.buf(b, 4*sh.rows)
				per := timeLaunches(b, g, func(i int) error {
					return g.k.MatVecQ8(g.s, typ, ws[i%len(ws)], xq, y, sh.rows, sh.cols)
				})
				b.ReportMetric(float64(len(raw))/per.Seconds()/1e9, "GB/s")
				b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
			})
		}
	}
}

// BenchmarkMatVecExperts is Qwen3-30B-A3B-like MoE decode: 128 experts of 768x2048 (gate,
// up) or 2048x768 (down) per tensor, 8 routed per token (and all 128, for bandwidth).
func BenchmarkMatVecExperts(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(3, 4))
	const nExp = 128
	for _, typ := range []cuda.QuantType{cuda.Q4_K, cuda.Q8_0} {
		for _, sh := range []struct {
			name       string
			rows, cols int
			perExpert  bool
		}{{"gate_768x2048", 768, 2048, false}, {"down_2048x768", 2048, 768, true}} {
			raw, _ := makeWeights(b, r, typ, nExp*sh.rows, sh.cols)
			stride := len(raw) / nExp
			w := upload(b, g, raw)
			for _, k := range []int{8, nExp} {
				b.Run(fmt.Sprintf("%v/%s/k=%d", typ, sh.name, k), func(b *testing.B) {
					// a fresh random choice of k experts per launch, from 64 precomputed sets
					sets := make([]cuda.DevicePtr, 64)
					for i := range sets {
						ids := make([]int32, k)
						for j, p := range r.Perm(nExp)[:k] {
							ids[j] = int32(p)
						}
						sets[i] = upload(b, g, ids)
					}
					x := upload(b, g, randFloats(r, k*sh.cols, 1))
					y := g.buf(b, 4*k*sh.rows)
					per := timeLaunches(b, g, func(i int) error {
						return g.k.MatVecExperts(g.s, typ, w, stride, sets[i%len(sets)], k, x, sh.perExpert, y, sh.rows, sh.cols)
					})
					b.ReportMetric(float64(k*stride)/per.Seconds()/1e9, "GB/s")
					b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
				})
				b.Run(fmt.Sprintf("q8/%v/%s/k=%d", typ, sh.name, k), func(b *testing.B) {
					sets := make([]cuda.DevicePtr, 64)
					for i := range sets {
						ids := make([]int32, k)
						for j, p := range r.Perm(nExp)[:k] {
							ids[j] = int32(p)
						}
						sets[i] = upload(b, g, ids)
					}
					nx := 1
					if sh.perExpert {
						nx = k
					}
					x := upload(b, g, randFloats(r, nx*sh.cols, 1))
					xq := g.buf(b, nx*cuda.Q8RowBytes(sh.cols))
					if err := g.k.QuantizeQ8(g.s, x, xq, nx, sh.cols); err != nil {
						b.Fatal(err)
					}
					y := g.buf(b, 4*k*sh.rows)
					per := timeLaunches(b, g, func(i int) error {
						return g.k.MatVecQ8Experts(g.s, typ, w, stride, sets[i%len(sets)], k, xq, sh.perExpert, y, sh.rows, sh.cols)
					})
					b.ReportMetric(float64(k*stride)/per.Seconds()/1e9, "GB/s")
					b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
				})
			}
		}
	}
}

// BenchmarkMoEFused is a whole MoE FFN of Qwen3-30B-A3B in decode (128 experts, 8
// routed, hidden 2048, ffn 768) through the fused kernels: quantise x, gate/up/SwiGLU,
// quantise h, down/combine/residual.
func BenchmarkMoEFused(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(13, 14))
	const nExp, hidden, ffn, topK = 128, 2048, 768, 8
	for _, typ := range []cuda.QuantType{cuda.Q4_K, cuda.Q8_0, cuda.IQ3_XXS, cuda.IQ2_XXS} {
		b.Run(typ.String(), func(b *testing.B) {
			rawG, _ := makeWeights(b, r, typ, nExp*ffn, hidden)
			rawD, _ := makeWeights(b, r, typ, nExp*hidden, ffn)
			wg, wu, wd := upload(b, g, rawG), upload(b, g, rawG), upload(b, g, rawD)
			sets := make([]cuda.DevicePtr, 64)
			for i := range sets {
				ids := make([]int32, topK)
				for j, p := range r.Perm(nExp)[:topK] {
					ids[j] = int32(p)
				}
				sets[i] = upload(b, g, ids)
			}
			wts := upload(b, g, []float32{.2, .2, .1, .1, .1, .1, .1, .1})
			x := upload(b, g, randFloats(r, hidden, 1))
			xq := g.buf(b, cuda.Q8RowBytes(hidden))
			h := g.buf(b, 4*topK*ffn)
			hq := g.buf(b, topK*cuda.Q8RowBytes(ffn))
			y := upload(b, g, make([]float32, hidden))
			per := timeLaunches(b, g, func(i int) error {
				ids := sets[i%len(sets)]
				if err := g.k.QuantizeQ8(g.s, x, xq, 1, hidden); err != nil {
					return err
				}
				if err := g.k.MoEGateUp(g.s, typ, wg, wu, len(rawG)/nExp, ids, topK, xq, h, ffn, hidden, cuda.MoEExtras{}); err != nil {
					return err
				}
				if err := g.k.QuantizeQ8(g.s, h, hq, topK, ffn); err != nil {
					return err
				}
				return g.k.MoEDown(g.s, typ, wd, len(rawD)/nExp, ids, wts, topK, hq, y, hidden, ffn, cuda.MoEExtras{})
			})
			bytes := 3 * topK * len(rawD) / nExp
			b.ReportMetric(float64(bytes)/per.Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
		})
	}
}

func BenchmarkGemm(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ m, n, k int }{{2048, 512, 2048}, {4096, 512, 4096}, {768, 512, 2048}} {
		for _, typ := range []cuda.QuantType{cuda.F16, cuda.Q4_K} {
			b.Run(fmt.Sprintf("%v/m%d_n%d_k%d", typ, sh.m, sh.n, sh.k), func(b *testing.B) {
				raw, _ := makeWeights(b, r, typ, sh.m, sh.k)
				w := upload(b, g, raw)
				x := upload(b, g, randFloats(r, sh.n*sh.k, 1))
				y := g.buf(b, 4*sh.m*sh.n)
				var scratch cuda.DevicePtr
				if n := cuda.GemmScratchBytes(typ, sh.m, sh.k); n > 0 {
					scratch = g.buf(b, n)
				}
				per := timeLaunches(b, g, func(int) error {
					return g.k.Gemm(g.s, typ, w, x, y, sh.m, sh.n, sh.k, scratch)
				})
				b.ReportMetric(2*float64(sh.m)*float64(sh.n)*float64(sh.k)/per.Seconds()/1e12, "TFLOP/s")
				b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
			})
		}
	}
}

// BenchmarkGemmQ is the fused dequantising GEMM at prefill shapes, and the grouped MoE
// form: 512 tokens routed to 8 of 128 experts of 768x2048 (Qwen3-30B-A3B gate/up) and to
// 4 of 32 experts of 2880x2880 (gpt-oss-20b).
func BenchmarkGemmQ(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []cuda.QuantType{cuda.Q4_K, cuda.Q8_0, cuda.MXFP4, cuda.Q4_0, cuda.Q5_K, cuda.Q6_K, cuda.IQ4_XS} {
		sh := struct{ m, n, k int }{2048, 512, 2048}
		b.Run(fmt.Sprintf("%v/m%d_n%d_k%d", typ, sh.m, sh.n, sh.k), func(b *testing.B) {
			raw, _ := makeWeights(b, r, typ, sh.m, sh.k)
			w := upload(b, g, raw)
			x := upload(b, g, randFloats(r, sh.n*sh.k, 1))
			y := g.buf(b, 4*sh.m*sh.n)
			per := timeLaunches(b, g, func(int) error { return g.k.GemmQ(g.s, typ, w, x, y, sh.m, sh.n, sh.k) })
			b.ReportMetric(2*float64(sh.m)*float64(sh.n)*float64(sh.k)/per.Seconds()/1e12, "TFLOP/s")
			b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
		})
		for _, ex := range []struct{ experts, m, k, topK int }{{128, 768, 2048, 8}, {32, 2880, 2880, 4}} {
			if ex.k%blockOf(typ) != 0 {
				continue // gpt-oss's 2880 is not whole 256-value blocks
			}
			b.Run(fmt.Sprintf("%v/experts_%dx%d_t512_k%d", typ, ex.m, ex.k, ex.topK), func(b *testing.B) {
				benchGemmExperts(b, g, r, typ, ex.experts, ex.m, ex.k, 512, ex.topK, false)
			})
			if typ.HasGemmQ8() {
				b.Run(fmt.Sprintf("%v/q8/experts_%dx%d_t512_k%d", typ, ex.m, ex.k, ex.topK), func(b *testing.B) {
					benchGemmExperts(b, g, r, typ, ex.experts, ex.m, ex.k, 512, ex.topK, true)
				})
			}
		}
	}
}

// benchGemmExperts times GemmExperts (q8: GemmExpertsQ8, the activations' quantisation
// included) for tokens routed to topK of experts at random.
func benchGemmExperts(b *testing.B, g *gpu, r *rand.Rand, typ cuda.QuantType, nExp, m, k, tokens, topK int, q8 bool) {
	raw, _ := makeWeights(b, r, typ, nExp*m, k)
	w := upload(b, g, raw)
	x := upload(b, g, randFloats(r, tokens*k, 1))
	lists := make([][]int32, nExp)
	for tk := 0; tk < tokens; tk++ {
		for _, e := range r.Perm(nExp)[:topK] {
			lists[e] = append(lists[e], int32(tk))
		}
	}
	var slotExpert, rowIdx []int32
	slotOff := []int32{0}
	maxRows := 0
	for e, l := range lists {
		slotExpert = append(slotExpert, int32(e))
		rowIdx = append(rowIdx, l...)
		slotOff = append(slotOff, int32(len(rowIdx)))
		maxRows = max(maxRows, len(l))
	}
	dse, dso, dri := upload(b, g, slotExpert), upload(b, g, slotOff), upload(b, g, rowIdx)
	y := g.buf(b, 4*len(rowIdx)*m)
	xq := g.buf(b, tokens*cuda.Q8SumsRowBytes(k))
	per := timeLaunches(b, g, func(int) error {
		if q8 {
			if err := g.k.QuantizeQ8Sums(g.s, x, xq, tokens, k); err != nil {
				return err
			}
			return g.k.GemmExpertsQ8(g.s, typ, w, len(raw)/nExp, dse, dso, dri, nExp, maxRows, len(rowIdx), xq, y, m, k)
		}
		return g.k.GemmExperts(g.s, typ, w, len(raw)/nExp, dse, dso, dri, nExp, maxRows, x, y, m, k)
	})
	b.ReportMetric(2*float64(len(rowIdx))*float64(m)*float64(k)/per.Seconds()/1e12, "TFLOP/s")
	b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
}

// BenchmarkLaunch is the cost of one tiny kernel launched from Go, alone and inside a
// captured graph of 100 launches: what decode pays per kernel.
func BenchmarkLaunch(b *testing.B) {
	g := setup(b)
	a := g.buf(b, 1024)
	if err := g.s.Memset(a, 0, 1024); err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) {
		per := timeDirect(b, g, func(int) error { return g.k.Add(g.s, a, a, a, 256) })
		b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
	})
	b.Run("graph", func(b *testing.B) {
		per := timeLaunches(b, g, func(int) error { return g.k.Add(g.s, a, a, a, 256) })
		b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
	})
}

// benchKV is one layer's K/V of positions rows in f16 and in int8, for the attention
// benchmarks.
type benchKV struct {
	k, v cuda.DevicePtr
	i8   cuda.Int8KV
}

func newBenchKV(b *testing.B, g *gpu, r *rand.Rand, positions, nKV, hd int) benchKV {
	kf, vf := randFloats(r, positions*nKV*hd, 1), randFloats(r, positions*nKV*hd, 1)
	block := cuda.Int8KVBlock(hd)
	k8, ks := quantizeInt8(kf, block)
	v8, vs := quantizeInt8(vf, block)
	return benchKV{k: upload(b, g, toF16(kf)), v: upload(b, g, toF16(vf)),
		i8: cuda.Int8KV{K: upload(b, g, k8), KScales: upload(b, g, ks), V: upload(b, g, v8), VScales: upload(b, g, vs)}}
}

// BenchmarkAttentionPrefill is one prompt chunk of 512 tokens' attention (qwen3moe
// 30b-a3b's heads) with each kernel and cache: the chunk at the start of the cache, and the
// last chunk of a 32,768-token prompt (ctx=32768), which reads the whole cache.
func BenchmarkAttentionPrefill(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(11, 12))
	const nHead, nKV, hd, nTok, deep = 32, 4, 128, 512, 32768
	c := newBenchKV(b, g, r, deep, nKV, hd)
	q := upload(b, g, randFloats(r, nTok*nHead*hd, 1))
	out := g.buf(b, 4*nTok*nHead*hd)
	kernels := []struct {
		name   string
		launch func(pos cuda.DevicePtr) error
	}{
		{"kv=f16", func(pos cuda.DevicePtr) error {
			return g.k.AttentionPrefill(g.s, q, c.k, c.v, out, pos, nTok, nHead, nKV, hd, 0.088, cuda.AttentionOptions{})
		}},
		{"kv=f16/mma", func(pos cuda.DevicePtr) error {
			return g.k.AttentionPrefillMMA(g.s, q, c.k, c.v, out, pos, nTok, nHead, nKV, hd, 0.088, cuda.AttentionOptions{})
		}},
		{"kv=int8", func(pos cuda.DevicePtr) error {
			return g.k.AttentionPrefillInt8(g.s, q, c.i8, out, pos, nTok, nHead, nKV, hd, 0.088, cuda.AttentionOptions{})
		}},
		{"kv=int8/mma", func(pos cuda.DevicePtr) error {
			return g.k.AttentionPrefillMMAInt8(g.s, q, c.i8, out, pos, nTok, nHead, nKV, hd, 0.088, cuda.AttentionOptions{})
		}},
	}
	for _, ctxLen := range []int{nTok, deep} {
		pos := make([]int32, nTok)
		for i := range pos {
			pos[i] = int32(ctxLen - nTok + i)
		}
		dpos := upload(b, g, pos)
		suffix := ""
		if ctxLen != nTok {
			suffix = fmt.Sprintf("/ctx=%d", ctxLen)
		}
		for _, k := range kernels {
			b.Run(k.name+suffix, func(b *testing.B) {
				per := timeLaunches(b, g, func(int) error { return k.launch(dpos) })
				b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
			})
		}
	}
}

// BenchmarkAttentionDecode is one decode step's attention at a few positions of a cache
// of 128k positions (qwen3moe 30b-a3b's heads; hd=256/...: Qwen3-Next's 16 query heads on 2
// kv heads of 256, which take the wide tensor-core kernel), launched with the spans the
// engine uses for that capacity (what a graph captured for it replays at every position),
// and with half and twice as many.
func BenchmarkAttentionDecode(b *testing.B) {
	g := setup(b)
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct {
		prefix         string
		nHead, nKV, hd int
		ctxLens        []int
	}{{"", 32, 4, 128, []int{600, 1024, 32768, 131072}}, {"hd=256/", 16, 2, 256, []int{600, 32768, 131072}}} {
		benchAttentionDecode(b, g, r, sh.prefix, sh.nHead, sh.nKV, sh.hd, sh.ctxLens)
	}
}

// benchAttentionDecode is one head shape of BenchmarkAttentionDecode, its cases named
// prefix + kv=KERNEL/ctx=N/splits=S.
func benchAttentionDecode(b *testing.B, g *gpu, r *rand.Rand, prefix string, nHead, nKV, hd int, ctxLens []int) {
	const capacity = 131072
	c := newBenchKV(b, g, r, capacity, nKV, hd)
	q := upload(b, g, randFloats(r, nHead*hd, 1))
	out := g.buf(b, 4*nHead*hd)
	def := cuda.DecodeSplits(capacity, nHead, nKV)
	scratch := g.buf(b, cuda.AttentionDecodeScratchBytes(nHead, hd, 2*def))
	scale := float32(1 / math.Sqrt(float64(hd)))
	for _, ctxLen := range ctxLens {
		pos := upload(b, g, []int32{int32(ctxLen - 1)})
		for _, nSplit := range []int{def, def / 2, 2 * def} {
			for _, k := range []struct {
				name string
				run  func() error
			}{
				{"f16", func() error {
					return g.k.AttentionDecode(g.s, q, c.k, c.v, out, pos, nHead, nKV, hd, scale, nSplit, scratch, cuda.AttentionOptions{})
				}},
				{"int8", func() error {
					return g.k.AttentionDecodeInt8(g.s, q, c.i8, out, pos, nHead, nKV, hd, scale, nSplit, scratch, cuda.AttentionOptions{})
				}},
				{"f16-mma", func() error {
					return g.k.AttentionDecodeMMA(g.s, q, c.k, c.v, out, pos, nHead, nKV, hd, scale, nSplit, scratch, cuda.AttentionOptions{})
				}},
				{"int8-mma", func() error {
					return g.k.AttentionDecodeMMAInt8(g.s, q, c.i8, out, pos, nHead, nKV, hd, scale, nSplit, scratch, cuda.AttentionOptions{})
				}},
			} {
				b.Run(fmt.Sprintf("%skv=%s/ctx=%d/splits=%d", prefix, k.name, ctxLen, nSplit), func(b *testing.B) {
					per := timeLaunches(b, g, func(int) error { return k.run() })
					b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
				})
			}
		}
	}
}

// BenchmarkMoEKernels times the fused MoE decode kernels one by one, at each rows-per-block
// choice (rpb0 is the launcher's own pick): Qwen3-30B-A3B's experts (128 of gate/up 768 x
// 2048 and down 2048 x 768, 8 routed) in Q4_K and Q8_0, and gpt-oss-20b's (32 of 2880 x
// 2880, 4 routed) in MXFP4. GB/s counts the routed experts' weight bytes.
func BenchmarkMoEKernels(b *testing.B) {
	g := setup(b)
	defer g.k.SetRowsPerBlock(0)
	r := rand.New(rand.NewPCG(15, 16))
	for _, m := range []moeShape{{cuda.Q4_K, 128, 8, 2048, 768}, {cuda.Q8_0, 128, 8, 2048, 768}, {cuda.MXFP4, 32, 4, 2880, 2880}} {
		b.Run(m.typ.String(), func(b *testing.B) { benchMoEKernels(b, g, r, m) })
	}
}

// moeShape is one model's experts: nExp of gate/up ff x hidden and down hidden x ff, topK
// routed per token.
type moeShape struct {
	typ                    cuda.QuantType
	nExp, topK, hidden, ff int
}

// benchMoEKernels is one model's part of BenchmarkMoEKernels (its weights made only when
// the pattern selects it).
func benchMoEKernels(b *testing.B, g *gpu, r *rand.Rand, m moeShape) {
	rawG, _ := makeWeights(b, r, m.typ, m.nExp*m.ff, m.hidden)
	rawD, _ := makeWeights(b, r, m.typ, m.nExp*m.hidden, m.ff)
	wg, wu, wd := upload(b, g, rawG), upload(b, g, rawG), upload(b, g, rawD)
	sets := make([]cuda.DevicePtr, 64)
	for i := range sets {
		ids := make([]int32, m.topK)
		for j, p := range r.Perm(m.nExp)[:m.topK] {
			ids[j] = int32(p)
		}
		sets[i] = upload(b, g, ids)
	}
	wts := make([]float32, m.topK)
	for i := range wts {
		wts[i] = 1 / float32(m.topK)
	}
	dw := upload(b, g, wts)
	xq := g.buf(b, cuda.Q8RowBytes(m.hidden))
	if err := g.k.QuantizeQ8(g.s, upload(b, g, randFloats(r, m.hidden, 1)), xq, 1, m.hidden); err != nil {
		b.Fatal(err)
	}
	h := g.buf(b, 4*m.topK*m.ff)
	hq := g.buf(b, m.topK*cuda.Q8RowBytes(m.ff))
	if err := g.k.QuantizeQ8(g.s, upload(b, g, randFloats(r, m.topK*m.ff, 1)), hq, m.topK, m.ff); err != nil {
		b.Fatal(err)
	}
	y := upload(b, g, make([]float32, m.hidden))
	sg, sd := len(rawG)/m.nExp, len(rawD)/m.nExp
	for _, rpb := range []int{0, 1, 2, 4} {
		g.k.SetRowsPerBlock(rpb)
		b.Run(fmt.Sprintf("gate_up_%dx%d_k%d/rpb%d", m.ff, m.hidden, m.topK, rpb), func(b *testing.B) {
			per := timeLaunches(b, g, func(i int) error {
				return g.k.MoEGateUp(g.s, m.typ, wg, wu, sg, sets[i%len(sets)], m.topK, xq, h, m.ff, m.hidden, cuda.MoEExtras{})
			})
			b.ReportMetric(float64(2*m.topK*sg)/per.Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
		})
		b.Run(fmt.Sprintf("down_%dx%d_k%d/rpb%d", m.hidden, m.ff, m.topK, rpb), func(b *testing.B) {
			per := timeLaunches(b, g, func(i int) error {
				return g.k.MoEDown(g.s, m.typ, wd, sd, sets[i%len(sets)], dw, m.topK, hq, y, m.hidden, m.ff, cuda.MoEExtras{})
			})
			b.ReportMetric(float64(m.topK*sd)/per.Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
		})
	}
}

// BenchmarkMatVecsQ8 times the attention projections of one decode step at each rows-per-
// block choice: q alone, k alone, and q, k and v in one launch (MatVecsQ8), for Qwen3-30B-A3B
// (Q4_K, q 4096 x 2048, k/v 512 x 2048, o 2048 x 4096) and gpt-oss-20b (Q8_0, q 4096 x 2880,
// k/v 512 x 2880, o 2880 x 4096). Weights rotate over copies beyond the L2.
func BenchmarkMatVecsQ8(b *testing.B) {
	g := setup(b)
	defer g.k.SetRowsPerBlock(0)
	r := rand.New(rand.NewPCG(17, 18))
	for _, m := range []attnShape{{cuda.Q4_K, 2048, 4096, 512, 4096}, {cuda.Q8_0, 2880, 4096, 512, 4096}} {
		b.Run(m.typ.String(), func(b *testing.B) { benchMatVecsQ8(b, g, r, m) })
	}
}

// attnShape is one model's attention projections: q qRows x hidden, k and v kvRows x
// hidden, o hidden x o.
type attnShape struct {
	typ                      cuda.QuantType
	hidden, qRows, kvRows, o int
}

// benchMatVecsQ8 is one model's part of BenchmarkMatVecsQ8.
func benchMatVecsQ8(b *testing.B, g *gpu, r *rand.Rand, m attnShape) {
	rawQ, _ := makeWeights(b, r, m.typ, m.qRows, m.hidden)
	rawK, _ := makeWeights(b, r, m.typ, m.kvRows, m.hidden)
	rawO, _ := makeWeights(b, r, m.typ, m.hidden, m.o)
	qs, ks, vs, ow := copies(b, g, rawQ), copies(b, g, rawK), copies(b, g, rawK), copies(b, g, rawO)
	xq := g.buf(b, cuda.Q8RowBytes(m.o))
	if err := g.k.QuantizeQ8(g.s, upload(b, g, randFloats(r, m.o, 1)), xq, 1, m.o); err != nil {
		b.Fatal(err)
	}
	yq, yk, yv, yo := g.buf(b, 4*m.qRows), g.buf(b, 4*m.kvRows), g.buf(b, 4*m.kvRows), g.buf(b, 4*m.hidden)
	for _, rpb := range []int{0, 1, 2, 4} {
		g.k.SetRowsPerBlock(rpb)
		for _, c := range []struct {
			name  string
			bytes int
			run   func(i int) error
		}{
			{fmt.Sprintf("q_%dx%d", m.qRows, m.hidden), len(rawQ), func(i int) error {
				return g.k.MatVecQ8(g.s, m.typ, qs[i%len(qs)], xq, yq, m.qRows, m.hidden)
			}},
			{fmt.Sprintf("k_%dx%d", m.kvRows, m.hidden), len(rawK), func(i int) error {
				return g.k.MatVecQ8(g.s, m.typ, ks[i%len(ks)], xq, yk, m.kvRows, m.hidden)
			}},
			{"qkv_one_launch", len(rawQ) + 2*len(rawK), func(i int) error {
				return g.k.MatVecsQ8(g.s, m.typ, xq, m.hidden, cuda.MatVecQ8Out{W: qs[i%len(qs)], Y: yq, Rows: m.qRows},
					cuda.MatVecQ8Out{W: ks[i%len(ks)], Y: yk, Rows: m.kvRows}, cuda.MatVecQ8Out{W: vs[i%len(vs)], Y: yv, Rows: m.kvRows})
			}},
			{fmt.Sprintf("o_%dx%d", m.hidden, m.o), len(rawO), func(i int) error {
				return g.k.MatVecQ8(g.s, m.typ, ow[i%len(ow)], xq, yo, m.hidden, m.o)
			}},
		} {
			b.Run(fmt.Sprintf("%s/rpb%d", c.name, rpb), func(b *testing.B) {
				per := timeLaunches(b, g, c.run)
				b.ReportMetric(float64(c.bytes)/per.Seconds()/1e9, "GB/s")
				b.ReportMetric(float64(per.Nanoseconds())/1e3, "us/op")
			})
		}
	}
}
