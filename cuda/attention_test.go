package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// attCase is one shape of the attention tests: the cache holds slots rows [slot][nKV][hd]
// (position p in slot p % ring when ring > 0), with optional sinks and a sliding window.
type attCase struct {
	hd, window, ring int
	sinks            bool
	// the heads and the positions of the cache (8 on 2 and 300 when 0)
	nHead, nKV, ctx int
}

func (c attCase) shape() (nHead, nKV, ctx int) {
	if c.nHead == 0 {
		return 8, 2, 300
	}
	return c.nHead, c.nKV, c.ctx
}

// refAttention is one query head against positions first..last of caches [slot][nKV][hd]
// (the values they hold, decoded), in float64, with the head's sink logit (nil: none) in the
// denominator.
func refAttention(q []float32, kc, vc []float64, kvh, nKV, hd, last int, scale float64, c attCase, sink *float32) []float64 {
	first := 0
	if c.window > 0 {
		first = max(0, last-c.window+1)
	}
	slot := func(p int) int {
		if c.ring > 0 {
			return p % c.ring
		}
		return p
	}
	s := make([]float64, last+1)
	mx := math.Inf(-1)
	for p := first; p <= last; p++ {
		d := 0.0
		for i := 0; i < hd; i++ {
			d += float64(q[i]) * kc[(slot(p)*nKV+kvh)*hd+i]
		}
		s[p] = d * scale
		mx = math.Max(mx, s[p])
	}
	if sink != nil {
		mx = math.Max(mx, float64(*sink))
	}
	sum := 0.0
	for p := first; p <= last; p++ {
		s[p] = math.Exp(s[p] - mx)
		sum += s[p]
	}
	if sink != nil {
		sum += math.Exp(float64(*sink) - mx)
	}
	out := make([]float64, hd)
	for p := first; p <= last; p++ {
		for i := 0; i < hd; i++ {
			out[i] += s[p] / sum * vc[(slot(p)*nKV+kvh)*hd+i]
		}
	}
	return out
}

// tiledTol bounds |kernel - float64 reference| for the kernels that keep q and the softmax
// weights in f32 (attention_decode, attention_prefill) on TestAttention's data.
const tiledTol = 2e-5

func checkAttention(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) { // NaN fails too
			t.Fatalf("%s: out[%d] = %g want %g", what, i, got[i], want[i])
		}
	}
}

// decodeFunc is one decode attention kernel over a cache that its closure holds.
type decodeFunc func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error

// attCache is one layer's K and V caches on the device in one format, what they decode
// to, and the kernels that read that format (decodeMMA, prefillMMA: the tensor-core ones).
type attCache struct {
	kf, vf              []float64
	decode, decodeMMA   decodeFunc
	prefill, prefillMMA func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error
}

// f16Cache uploads random f16 caches of n values each.
func f16Cache(t *testing.T, g *gpu, r *rand.Rand, n int) attCache {
	kh, vh := toF16(randFloats(r, n, 1)), toF16(randFloats(r, n, 1))
	dk, dv := upload(t, g, kh), upload(t, g, vh)
	return attCache{kf: widen(fromF16(kh)), vf: widen(fromF16(vh)),
		decode: func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error {
			return g.k.AttentionDecode(g.s, q, dk, dv, out, pos, nHead, nKV, hd, scale, nSplit, scratch, o)
		},
		decodeMMA: func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error {
			return g.k.AttentionDecodeMMA(g.s, q, dk, dv, out, pos, nHead, nKV, hd, scale, nSplit, scratch, o)
		},
		prefill: func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefill(g.s, q, dk, dv, out, pos, nTok, nHead, nKV, hd, scale, o)
		},
		prefillMMA: func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefillMMA(g.s, q, dk, dv, out, pos, nTok, nHead, nKV, hd, scale, o)
		}}
}

// int8Cache uploads random values quantised as the int8 cache holds them (rows of hd).
func int8Cache(t *testing.T, g *gpu, r *rand.Rand, n, hd int) attCache {
	block := cuda.Int8KVBlock(hd)
	k8, ks := quantizeInt8(randFloats(r, n, 1), block)
	v8, vs := quantizeInt8(randFloats(r, n, 1), block)
	c := cuda.Int8KV{K: upload(t, g, k8), KScales: upload(t, g, ks), V: upload(t, g, v8), VScales: upload(t, g, vs)}
	return attCache{kf: dequantizeInt8(k8, ks, block), vf: dequantizeInt8(v8, vs, block),
		decode: func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error {
			return g.k.AttentionDecodeInt8(g.s, q, c, out, pos, nHead, nKV, hd, scale, nSplit, scratch, o)
		},
		decodeMMA: func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error {
			return g.k.AttentionDecodeMMAInt8(g.s, q, c, out, pos, nHead, nKV, hd, scale, nSplit, scratch, o)
		},
		prefill: func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefillInt8(g.s, q, c, out, pos, nTok, nHead, nKV, hd, scale, o)
		},
		prefillMMA: func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefillMMAInt8(g.s, q, c, out, pos, nTok, nHead, nKV, hd, scale, o)
		}}
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// quantizeInt8 is engine/kv's int8 quantisation, written out again: per block of values,
// scale = max|x|/127 and round(x * (1/scale)) half away from zero (scale 0 for zeros).
func quantizeInt8(x []float32, block int) ([]int8, []float32) {
	q, scales := make([]int8, len(x)), make([]float32, len(x)/block)
	for b := range scales {
		var amax float32
		for _, v := range x[b*block : (b+1)*block] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if amax == 0 {
			continue
		}
		scale := amax / 127
		inv := 1 / scale
		for i := b * block; i < (b+1)*block; i++ {
			q[i] = int8(max(-127, min(127, math.Round(float64(x[i]*inv)))))
		}
		scales[b] = scale
	}
	return q, scales
}

func dequantizeInt8(q []int8, scales []float32, block int) []float64 {
	out := make([]float64, len(q))
	for i, x := range q {
		out[i] = float64(x) * float64(scales[i/block])
	}
	return out
}

// TestAttention runs decode (with and without split-K) and prefill on random data against
// the float64 reference, for f16 and int8 caches, over head sizes that tile a warp exactly
// and ones that do not (int8: one scale per row when not a multiple of 32), with sinks,
// sliding windows and ring layouts.
func TestAttention(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(23, 24))
	var cases []attCase
	for _, hd := range []int{16, 32, 48, 64, 80, 96, 128, 208, 256} {
		cases = append(cases, attCase{hd: hd}, attCase{hd: hd, sinks: true}, attCase{hd: hd, sinks: true, window: 8},
			attCase{hd: hd, window: 24, ring: 41}, attCase{hd: hd, sinks: true, window: 8, ring: 24})
	}
	runAttentionCases(t, g, r, cases, true)
}

// TestAttentionDecodeGroups runs decode over GQA groups that a block takes whole (8), in
// slices (12 query heads on a kv head: two blocks of 6; 20: 7, 7 and 6) and one head a group,
// over a cache long enough for many spans, with sliding windows that start mid-span and
// ring layouts whose chunks wrap. Head size 256 runs the wide tensor-core kernel (its warps
// split the output's columns) on the same groups.
func TestAttentionDecodeGroups(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(25, 26))
	var cases []attCase
	for _, sh := range []struct{ nHead, nKV int }{{32, 4}, {24, 2}, {20, 1}, {3, 3}} {
		for _, hd := range []int{64, 80, 128, 256} {
			cases = append(cases, attCase{hd: hd, nHead: sh.nHead, nKV: sh.nKV, ctx: 2100},
				attCase{hd: hd, sinks: true, window: 700, nHead: sh.nHead, nKV: sh.nKV, ctx: 2100},
				attCase{hd: hd, sinks: true, window: 300, ring: 333, nHead: sh.nHead, nKV: sh.nKV, ctx: 2100})
		}
	}
	runAttentionCases(t, g, r, cases, false)
}

func runAttentionCases(t *testing.T, g *gpu, r *rand.Rand, cases []attCase, prefill bool) {
	t.Helper()
	for _, c := range cases {
		for _, kind := range []string{"f16", "int8"} {
			hd := c.hd
			_, nKV, slots := c.shape()
			if c.ring > 0 {
				slots = c.ring
			}
			cache := f16Cache(t, g, r, slots*nKV*hd)
			if kind == "int8" {
				cache = int8Cache(t, g, r, slots*nKV*hd, hd)
			}
			nHead, _, ctx := c.shape()
			name := fmt.Sprintf("%s hd=%d heads=%d/%d ctx=%d sinks=%v window=%d ring=%d", kind, hd, nHead, nKV, ctx, c.sinks, c.window, c.ring)
			testAttentionDecode(t, g, r, c, cache.kf, cache.vf, cache.decode, tiledTol, name)
			if cuda.AttentionDecodeMMAFits(hd) {
				testAttentionDecode(t, g, r, c, cache.kf, cache.vf, cache.decodeMMA, mmaPrefillTol, name+" mma")
			}
			if prefill {
				testAttentionPrefill(t, g, r, c, cache, name)
			}
		}
	}
}

// caseSinks uploads random sinks when the case has them.
func caseSinks(t *testing.T, g *gpu, r *rand.Rand, c attCase, opts *cuda.AttentionOptions) func(h int) *float32 {
	nHead, _, _ := c.shape()
	if !c.sinks {
		return func(int) *float32 { return nil }
	}
	sinks := randFloats(r, nHead, 2)
	opts.Sinks = upload(t, g, sinks)
	return func(h int) *float32 { return &sinks[h] }
}

// testAttentionDecode runs decode (over caches holding kf, vf) at several positions and span
// counts against the float64 reference, every output within tol of it.
func testAttentionDecode(t *testing.T, g *gpu, r *rand.Rand, c attCase, kf, vf []float64, decode decodeFunc, tol float64, name string) {
	t.Helper()
	nHead, nKV, ctxLen := c.shape()
	hd := c.hd
	scale := 1 / math.Sqrt(float64(hd))
	opts := cuda.AttentionOptions{Window: c.window, Ring: c.ring}
	sinkOf := caseSinks(t, g, r, c, &opts)
	splits := []int{1, 3, 8, cuda.DecodeSplitsMMA(ctxLen, nHead, nKV)}
	lasts := []int{0, 5, 31, 32, 63, 64, 65, 200, ctxLen - 1}
	if ctxLen > 1000 {
		// spans of 128 (the shortest), a span count that leaves a short last span, and the
		// engine's count for this capacity
		splits = []int{1, 7, cuda.DecodeSplits(ctxLen, nHead, nKV), cuda.DecodeSplitsMMA(ctxLen, nHead, nKV)}
		lasts = []int{127, 128, 129, 1000, 1337, ctxLen - 1}
	}
	for _, nSplit := range splits {
		scratch := cuda.DevicePtr(0)
		if b := cuda.AttentionDecodeScratchBytes(nHead, hd, nSplit); b > 0 {
			scratch = g.buf(t, b)
		}
		for _, last := range lasts {
			q := randFloats(r, nHead*hd, 1)
			dq, dpos := upload(t, g, q), upload(t, g, []int32{int32(last)})
			dout := g.buf(t, 4*nHead*hd)
			o := opts
			if nSplit > 1 && hd%32 == 0 { // the merge quantises the output too
				o.Q8 = g.buf(t, cuda.Q8RowBytes(nHead*hd))
			} else if nSplit > 1 {
				bad := opts
				bad.Q8 = g.buf(t, cuda.Q8RowBytes(nHead*32))
				if err := decode(dq, dout, dpos, nHead, nKV, hd, float32(scale), nSplit, scratch, bad); err == nil {
					t.Errorf("decode %s: a quantised output of head size %d was not refused", name, hd)
				}
			}
			if err := decode(dq, dout, dpos, nHead, nKV, hd, float32(scale), nSplit, scratch, o); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, g, dout, nHead*hd)
			if o.Q8 != 0 {
				checkMergedQ8(t, g, dout, o.Q8, nHead*hd, fmt.Sprintf("decode %s pos=%d splits=%d", name, last, nSplit))
			}
			for h := 0; h < nHead; h++ {
				want := refAttention(q[h*hd:(h+1)*hd], kf, vf, h/(nHead/nKV), nKV, hd, last, scale, c, sinkOf(h))
				checkAttention(t, fmt.Sprintf("decode %s pos=%d splits=%d head %d", name, last, nSplit, h), got[h*hd:(h+1)*hd], want, tol)
			}
		}
	}
}

// checkMergedQ8 compares the quantised row the merge wrote at xq with QuantizeQ8 of its
// output at out (cols values), byte for byte.
func checkMergedQ8(t *testing.T, g *gpu, out, xq cuda.DevicePtr, cols int, what string) {
	t.Helper()
	want := g.buf(t, cuda.Q8RowBytes(cols))
	if err := g.k.QuantizeQ8(g.s, out, want, 1, cols); err != nil {
		t.Fatal(err)
	}
	n := cols + 4*(cols/32) // the values and the scales, not the row's padding
	gotB, wantB := download[byte](t, g, xq, n), download[byte](t, g, want, n)
	for i := range gotB {
		if gotB[i] != wantB[i] {
			t.Errorf("%s: merged q8 byte %d of %d is %#x, QuantizeQ8 gives %#x", what, i, n, gotB[i], wantB[i])
			return
		}
	}
}

func testAttentionPrefill(t *testing.T, g *gpu, r *rand.Rand, c attCase, cache attCache, name string) {
	t.Helper()
	nHead, nKV, _ := c.shape()
	hd := c.hd
	scale := 1 / math.Sqrt(float64(hd))
	opts := cuda.AttentionOptions{Window: c.window, Ring: c.ring}
	sinkOf := caseSinks(t, g, r, c, &opts)
	// 17 tokens at positions start..start+16
	for _, start := range []int{0, 40, 250} {
		const nTok = 17
		pos := make([]int32, nTok)
		for i := range pos {
			pos[i] = int32(start + i)
		}
		q := randFloats(r, nTok*nHead*hd, 1)
		dq, dpos := upload(t, g, q), upload(t, g, pos)
		dout := g.buf(t, 4*nTok*nHead*hd)
		if err := cache.prefill(dq, dout, dpos, nTok, nHead, nKV, hd, float32(scale), opts); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, g, dout, nTok*nHead*hd)
		for tk := 0; tk < nTok; tk++ {
			for h := 0; h < nHead; h++ {
				off := (tk*nHead + h) * hd
				want := refAttention(q[off:off+hd], cache.kf, cache.vf, h/(nHead/nKV), nKV, hd, int(pos[tk]), scale, c, sinkOf(h))
				checkAttention(t, fmt.Sprintf("prefill %s token %d (pos %d) head %d", name, tk, pos[tk], h), got[off:off+hd], want, tiledTol)
			}
		}
	}
}

// mmaLongRel bounds the tensor-core decode's max |Δ| over the output's RMS in
// TestAttentionDecodeLongContext.
const mmaLongRel = 6e-3

// TestAttentionDecodeLongContext is decode at the 131,072th position of a cache of that
// many (gpt-oss's context; qwen3moe's with YaRN) against the float64 reference, f16 and
// int8, 4 query heads on one kv head, with the engine's span count for that capacity and a
// sliding-window layer's sinks; and the same at head size 256 (the wide tensor-core kernel)
// over 32,768 positions. Scores are drawn three times wider than TestAttention's so
// that the softmax is far from flat; the bound is relative to the output's RMS (over 128k
// positions the output is a small average), 1e-4 of it.
//
// The tensor-core kernel rounds q and the softmax weights to f16 (a relative 2^-11 each): on
// these scores (std ~1) that moves each weight by ~3e-4 of itself, and the output, an average
// of ~n random values, by about that fraction of its RMS each; mmaLongRel allows ten times
// the sum of the two.
func TestAttentionDecodeLongContext(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(27, 28))
	const nHead, nKV = 4, 1
	for _, sh := range []struct{ hd, ctx int }{{128, 131072}, {256, 32768}} {
		for _, kind := range []string{"f16", "int8"} {
			testAttentionDecodeLong(t, g, r, kind, nHead, nKV, sh.hd, sh.ctx)
		}
	}
}

// testAttentionDecodeLong is one head size and cache kind of TestAttentionDecodeLongContext.
func testAttentionDecodeLong(t *testing.T, g *gpu, r *rand.Rand, kind string, nHead, nKV, hd, ctx int) {
	t.Helper()
	cache := f16Cache(t, g, r, ctx*nKV*hd)
	if kind == "int8" {
		cache = int8Cache(t, g, r, ctx*nKV*hd, hd)
	}
	for _, c := range []attCase{{hd: hd, nHead: nHead, nKV: nKV, ctx: ctx}, {hd: hd, sinks: true, window: 4096, nHead: nHead, nKV: nKV, ctx: ctx}} {
		opts := cuda.AttentionOptions{Window: c.window}
		sinkOf := caseSinks(t, g, r, c, &opts)
		nSplit, nSplitMMA := cuda.DecodeSplits(ctx, nHead, nKV), cuda.DecodeSplitsMMA(ctx, nHead, nKV)
		scratch := g.buf(t, cuda.AttentionDecodeScratchBytes(nHead, hd, max(nSplit, nSplitMMA)))
		scale := 3 / math.Sqrt(float64(hd))
		for _, last := range []int{ctx / 2, ctx - 1} {
			q := randFloats(r, nHead*hd, 1)
			want := make([][]float64, nHead)
			for h := range nHead {
				want[h] = refAttention(q[h*hd:(h+1)*hd], cache.kf, cache.vf, 0, nKV, hd, last, scale, c, sinkOf(h))
			}
			for _, k := range []struct {
				name   string
				decode decodeFunc
				rel    float64
				splits int
			}{{kind, cache.decode, 1e-4, nSplit}, {kind + " mma", cache.decodeMMA, mmaLongRel, nSplitMMA}} {
				dout := g.buf(t, 4*nHead*hd)
				if err := k.decode(upload(t, g, q), dout, upload(t, g, []int32{int32(last)}), nHead, nKV, hd, float32(scale), k.splits, scratch, opts); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dout, nHead*hd)
				for h := range nHead {
					var sq, worst float64
					for i, w := range want[h] {
						sq += w * w
						worst = math.Max(worst, math.Abs(float64(got[h*hd+i])-w))
					}
					rms := math.Sqrt(sq / float64(hd))
					t.Logf("%s hd=%d window=%d pos %d head %d: max |Δ| %.3g, output RMS %.3g", k.name, hd, c.window, last, h, worst, rms)
					if !(worst <= k.rel*rms) {
						t.Errorf("%s hd=%d window=%d pos %d head %d: max |Δ| %.3g over an output RMS of %.3g (limit %g of it)", k.name, hd, c.window, last, h, worst, rms, k.rel)
					}
				}
			}
		}
	}
}

// TestKVWriteInt8 quantises random rows (with a zero block, and a ring the batch wraps
// around) into an int8 cache and compares every value and scale with the CPU's rule, bit
// for bit.
func TestKVWriteInt8(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ kvHeads, hd, ring int }{{2, 128, 0}, {3, 48, 0}, {4, 64, 29}, {1, 16, 0}, {2, 80, 0}, {8, 256, 0}} {
		const tokens, slots = 13, 50
		row := c.kvHeads * c.hd
		block := cuda.Int8KVBlock(c.hd)
		src := randFloats(r, tokens*row, 3)
		clear(src[row : row+block]) // token 1's first block is all zeros
		pos := make([]int32, tokens)
		for i := range pos {
			pos[i] = int32(20 + 2*i)
		}
		dcache, dscales := g.buf(t, slots*row), g.buf(t, 4*slots*row/block)
		if err := g.k.KVWriteInt8(g.s, upload(t, g, src), dcache, dscales, upload(t, g, pos), tokens, c.kvHeads, c.hd, c.ring); err != nil {
			t.Fatal(err)
		}
		cache, scales := download[int8](t, g, dcache, slots*row), download[float32](t, g, dscales, slots*row/block)
		for i, p := range pos {
			slot := int(p)
			if c.ring > 0 {
				slot %= c.ring
			}
			wq, ws := quantizeInt8(src[i*row:(i+1)*row], block)
			gq, gs := cache[slot*row:(slot+1)*row], scales[slot*row/block:(slot+1)*row/block]
			for j := range wq {
				if gq[j] != wq[j] {
					t.Fatalf("kv heads %d hd %d ring %d: token %d value %d = %d, want %d", c.kvHeads, c.hd, c.ring, i, j, gq[j], wq[j])
				}
			}
			for j := range ws {
				if math.Float32bits(gs[j]) != math.Float32bits(ws[j]) {
					t.Fatalf("kv heads %d hd %d ring %d: token %d scale %d = %g, want %g", c.kvHeads, c.hd, c.ring, i, j, gs[j], ws[j])
				}
			}
		}
	}
}

// TestAttentionRefusesBadShapes: head sizes the kernels do not take and a window wider
// than its ring are errors, not launches.
func TestAttentionRefusesBadShapes(t *testing.T) {
	g := setup(t)
	for _, c := range []struct {
		hd   int
		opts cuda.AttentionOptions
	}{{40, cuda.AttentionOptions{}}, {272, cuda.AttentionOptions{}}, {0, cuda.AttentionOptions{}}, {64, cuda.AttentionOptions{Window: 32, Ring: 16}}} {
		if err := g.k.AttentionPrefill(g.s, 0, 0, 0, 0, 0, 1, 8, 2, c.hd, 1, c.opts); err == nil {
			t.Errorf("head size %d, %+v: no error", c.hd, c.opts)
		}
	}
}
