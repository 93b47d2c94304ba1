package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// mmaPrefillTol bounds |AttentionPrefillMMA(Int8) - float64 reference| on the data of
// TestAttentionPrefillMMA and TestAttentionPrefillMMAInt8 (q, K and V in [-1, 1]; the
// reference reads the cache's own values, f16 or dequantised int8), against the tiled
// kernels' 2e-5 (TestAttention). The tensor cores take f16: q and the softmax weights P are
// rounded on the way in (a relative 2^-11 each), and so are an int8 cache's dequantised K and
// V (an f16 cache's are exact). Rounding V moves an output by at most 2^-12 (|V| <= 1), P by
// 2^-11 of it; rounding q and K moves a logit by about 2^-11 of |q.k|/sqrt(hd) each (random
// signs over hd terms), an output by at most twice that. Together well under 1e-3; a model
// of the four roundings on these shapes gives up to 1e-4 (f16 cache) and 3e-4 (int8).
const mmaPrefillTol = 3e-3

// mmaPrefillCase is one cache (attCase: head size, heads, positions, window, ring, sinks) and
// the batches run against it, each n queries at positions start..start+n-1.
type mmaPrefillCase struct {
	attCase
	batches []struct{ start, n int }
}

// mmaPrefillCases: every head size the kernels take, batches that span several 64-query
// blocks and end mid-block (or are one token), starting at position 0 and mid-cache;
// plain causal, sinks, windows shorter than a K tile and wider than one, rings that wrap
// inside a tile; GQA groups of 4, 6, 8 and 20 query heads and one head a group (3 on 3); cache
// lengths that are not a multiple of the tile.
func mmaPrefillCases() []mmaPrefillCase {
	type b = struct{ start, n int }
	std := []b{{0, 150}, {100, 131}, {299, 1}}
	var cases []mmaPrefillCase
	for _, hd := range []int{16, 32, 48, 64, 80, 96, 112, 128} {
		for _, c := range []attCase{{hd: hd}, {hd: hd, sinks: true}, {hd: hd, sinks: true, window: 8},
			{hd: hd, window: 70, ring: 97}, {hd: hd, sinks: true, window: 8, ring: 24}} {
			cases = append(cases, mmaPrefillCase{c, std})
		}
	}
	return append(cases,
		// qwen3moe 30b-a3b's heads: 32 on 4 kv heads of 128
		mmaPrefillCase{attCase{hd: 128, nHead: 32, nKV: 4, ctx: 520}, []b{{0, 130}, {390, 130}}},
		mmaPrefillCase{attCase{hd: 128, nHead: 32, nKV: 4, ctx: 520, sinks: true, window: 128, ring: 200}, []b{{300, 200}}},
		// one query head a group, a window that starts mid-tile
		mmaPrefillCase{attCase{hd: 96, nHead: 3, nKV: 3, ctx: 200, window: 33}, []b{{0, 200}, {137, 63}}},
		// 20 query heads on one kv head, a ring just long enough for the batch
		mmaPrefillCase{attCase{hd: 112, nHead: 20, nKV: 1, ctx: 257, sinks: true, window: 100, ring: 129}, []b{{128, 129}}},
		// 6 query heads a group, a cache of one tile and one position
		mmaPrefillCase{attCase{hd: 32, nHead: 12, nKV: 2, ctx: 65}, []b{{0, 65}, {64, 1}, {1, 64}}},
		// gpt-oss's heads: 64 on 8 kv heads of 64, window 128, sinks
		mmaPrefillCase{attCase{hd: 64, nHead: 64, nKV: 8, ctx: 300, sinks: true, window: 128}, []b{{0, 97}, {170, 130}}},
	)
}

// TestAttentionPrefillMMA checks the tensor-core prefill attention over an f16 cache against
// the float64 reference on random data, for every case of mmaPrefillCases.
func TestAttentionPrefillMMA(t *testing.T) {
	g := setup(t)
	runMMAPrefillCases(t, g, rand.New(rand.NewPCG(61, 62)), func(r *rand.Rand, n, _ int) attCache { return f16Cache(t, g, r, n) })
}

// TestAttentionPrefillMMAInt8 is TestAttentionPrefillMMA over an int8 cache (random values
// quantised as engine/kv does; the reference reads them dequantised).
func TestAttentionPrefillMMAInt8(t *testing.T) {
	g := setup(t)
	runMMAPrefillCases(t, g, rand.New(rand.NewPCG(63, 64)), func(r *rand.Rand, n, hd int) attCache { return int8Cache(t, g, r, n, hd) })
}

// runMMAPrefillCases runs every case of mmaPrefillCases through the tensor-core kernel of
// the caches newCache makes on g (n values of head size hd), against the float64 reference.
func runMMAPrefillCases(t *testing.T, g *gpu, r *rand.Rand, newCache func(r *rand.Rand, n, hd int) attCache) {
	t.Helper()
	for _, c := range mmaPrefillCases() {
		nHead, nKV, ctxLen := c.shape()
		hd := c.hd
		name := fmt.Sprintf("hd=%d heads=%d/%d ctx=%d sinks=%v window=%d ring=%d", hd, nHead, nKV, ctxLen, c.sinks, c.window, c.ring)
		slots := ctxLen
		if c.ring > 0 {
			slots = c.ring
		}
		cache := newCache(r, slots*nKV*hd, hd)
		scale := 1 / math.Sqrt(float64(hd))
		opts := cuda.AttentionOptions{Window: c.window, Ring: c.ring}
		sinkOf := caseSinks(t, g, r, c.attCase, &opts)
		for _, sh := range c.batches {
			if sh.start+sh.n > ctxLen {
				t.Fatalf("%s: batch %d+%d runs past the cache", name, sh.start, sh.n)
			}
			pos := make([]int32, sh.n)
			for i := range pos {
				pos[i] = int32(sh.start + i)
			}
			q := randFloats(r, sh.n*nHead*hd, 1)
			dq, dpos := upload(t, g, q), upload(t, g, pos)
			dout := g.buf(t, 4*sh.n*nHead*hd)
			if err := cache.prefillMMA(dq, dout, dpos, sh.n, nHead, nKV, hd, float32(scale), opts); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := download[float32](t, g, dout, sh.n*nHead*hd)
			worst := 0.0
			for tk := 0; tk < sh.n; tk++ {
				for h := 0; h < nHead; h++ {
					off := (tk*nHead + h) * hd
					want := refAttention(q[off:off+hd], cache.kf, cache.vf, h/(nHead/nKV), nKV, hd, int(pos[tk]), scale, c.attCase, sinkOf(h))
					for i, w := range want {
						d := math.Abs(float64(got[off+i]) - w)
						if !(d <= mmaPrefillTol) { // NaN fails too
							t.Fatalf("%s, batch %d+%d: token %d (pos %d) head %d out[%d] = %g want %g", name, sh.start, sh.n, tk, pos[tk], h, i, got[off+i], w)
						}
						worst = max(worst, d)
					}
				}
			}
			t.Logf("%s, batch %d+%d: max |Δ| %.2g", name, sh.start, sh.n, worst)
		}
	}
}

// TestAttentionPrefillMMAFits: the tensor-core kernels take multiples of 16 up to 128,
// every one of which AttentionPrefill also takes (the engine falls back to it).
func TestAttentionPrefillMMAFits(t *testing.T) {
	for hd := -16; hd <= cuda.MaxAttentionHeadDim+16; hd++ {
		want := hd > 0 && hd <= 128 && hd%16 == 0
		if got := cuda.AttentionPrefillMMAFits(hd); got != want {
			t.Errorf("AttentionPrefillMMAFits(%d) = %v, want %v", hd, got, want)
		}
	}
}

// TestAttentionDecodeMMAFits: the tensor-core decode kernels are the prefill ones' head sizes
// (multiples of 16 up to 128) and 256, whose warps split the output's columns; other head
// sizes take attention_decode.
func TestAttentionDecodeMMAFits(t *testing.T) {
	for hd := -16; hd <= cuda.MaxAttentionHeadDim+16; hd++ {
		want := hd > 0 && hd <= 128 && hd%16 == 0 || hd == 256
		if got := cuda.AttentionDecodeMMAFits(hd); got != want {
			t.Errorf("AttentionDecodeMMAFits(%d) = %v, want %v", hd, got, want)
		}
	}
}

// TestAttentionPrefillMMARefuses: head sizes without a kernel (including ones that
// AttentionPrefill takes), a window wider than its ring and an empty batch are errors, not
// launches, for either cache.
func TestAttentionPrefillMMARefuses(t *testing.T) {
	g := setup(t)
	launchers := map[string]func(hd, nTok int, o cuda.AttentionOptions) error{
		"f16": func(hd, nTok int, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefillMMA(g.s, 0, 0, 0, 0, 0, nTok, 8, 2, hd, 1, o)
		},
		"int8": func(hd, nTok int, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefillMMAInt8(g.s, 0, cuda.Int8KV{}, 0, 0, nTok, 8, 2, hd, 1, o)
		},
	}
	for kind, launch := range launchers {
		for _, c := range []struct {
			hd, nTok int
			opts     cuda.AttentionOptions
		}{{8, 1, cuda.AttentionOptions{}}, {40, 1, cuda.AttentionOptions{}}, {144, 1, cuda.AttentionOptions{}}, {256, 1, cuda.AttentionOptions{}},
			{64, 1, cuda.AttentionOptions{Window: 32, Ring: 16}}, {64, 0, cuda.AttentionOptions{}}} {
			if err := launch(c.hd, c.nTok, c.opts); err == nil {
				t.Errorf("%s cache, head size %d, %d tokens, %+v: no error", kind, c.hd, c.nTok, c.opts)
			}
		}
	}
}
