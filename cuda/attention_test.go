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

func checkAttention(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > 2e-5 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: out[%d] = %g want %g", what, i, got[i], want[i])
		}
	}
}

// attCache is one layer's K and V caches on the device in one format, what they decode
// to, and the kernels that read that format.
type attCache struct {
	kf, vf  []float64
	decode  func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error
	prefill func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error
}

// f16Cache uploads random f16 caches of n values each.
func f16Cache(t *testing.T, g *gpu, r *rand.Rand, n int) attCache {
	kh, vh := toF16(randFloats(r, n, 1)), toF16(randFloats(r, n, 1))
	dk, dv := upload(t, g, kh), upload(t, g, vh)
	return attCache{kf: widen(fromF16(kh)), vf: widen(fromF16(vh)),
		decode: func(q, out, pos cuda.DevicePtr, nHead, nKV, hd int, scale float32, nSplit int, scratch cuda.DevicePtr, o cuda.AttentionOptions) error {
			return g.k.AttentionDecode(g.s, q, dk, dv, out, pos, nHead, nKV, hd, scale, nSplit, scratch, o)
		},
		prefill: func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefill(g.s, q, dk, dv, out, pos, nTok, nHead, nKV, hd, scale, o)
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
		prefill: func(q, out, pos cuda.DevicePtr, nTok, nHead, nKV, hd int, scale float32, o cuda.AttentionOptions) error {
			return g.k.AttentionPrefillInt8(g.s, q, c, out, pos, nTok, nHead, nKV, hd, scale, o)
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
	const ctxLen, nHead, nKV = 300, 8, 2
	var cases []attCase
	for _, hd := range []int{16, 32, 48, 64, 80, 96, 128, 208, 256} {
		cases = append(cases, attCase{hd: hd}, attCase{hd: hd, sinks: true}, attCase{hd: hd, sinks: true, window: 8},
			attCase{hd: hd, window: 24, ring: 41}, attCase{hd: hd, sinks: true, window: 8, ring: 24})
	}
	for _, c := range cases {
		for _, kind := range []string{"f16", "int8"} {
			hd := c.hd
			slots := ctxLen
			if c.ring > 0 {
				slots = c.ring
			}
			cache := f16Cache(t, g, r, slots*nKV*hd)
			if kind == "int8" {
				cache = int8Cache(t, g, r, slots*nKV*hd, hd)
			}
			testAttentionCase(t, g, r, c, cache, fmt.Sprintf("%s hd=%d sinks=%v window=%d ring=%d", kind, hd, c.sinks, c.window, c.ring))
		}
	}
}

func testAttentionCase(t *testing.T, g *gpu, r *rand.Rand, c attCase, cache attCache, name string) {
	t.Helper()
	const ctxLen, nHead, nKV = 300, 8, 2
	hd := c.hd
	kf, vf := cache.kf, cache.vf
	scale := 1 / math.Sqrt(float64(hd))
	opts := cuda.AttentionOptions{Window: c.window, Ring: c.ring}
	var sinks []float32
	if c.sinks {
		sinks = randFloats(r, nHead, 2)
		opts.Sinks = upload(t, g, sinks)
	}
	sinkOf := func(h int) *float32 {
		if sinks == nil {
			return nil
		}
		return &sinks[h]
	}
	for _, nSplit := range []int{1, 3, 8} {
		scratch := cuda.DevicePtr(0)
		if b := cuda.AttentionDecodeScratchBytes(nHead, hd, nSplit); b > 0 {
			scratch = g.buf(t, b)
		}
		for _, last := range []int{0, 5, 31, 32, 200, ctxLen - 1} {
			q := randFloats(r, nHead*hd, 1)
			dq, dpos := upload(t, g, q), upload(t, g, []int32{int32(last)})
			dout := g.buf(t, 4*nHead*hd)
			if err := cache.decode(dq, dout, dpos, nHead, nKV, hd, float32(scale), nSplit, scratch, opts); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, g, dout, nHead*hd)
			for h := 0; h < nHead; h++ {
				want := refAttention(q[h*hd:(h+1)*hd], kf, vf, h/(nHead/nKV), nKV, hd, last, scale, c, sinkOf(h))
				checkAttention(t, fmt.Sprintf("decode %s pos=%d splits=%d head %d", name, last, nSplit, h), got[h*hd:(h+1)*hd], want)
			}
		}
	}
	// prefill: 17 tokens at positions start..start+16
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
				want := refAttention(q[off:off+hd], kf, vf, h/(nHead/nKV), nKV, hd, int(pos[tk]), scale, c, sinkOf(h))
				checkAttention(t, fmt.Sprintf("prefill %s token %d (pos %d) head %d", name, tk, pos[tk], h), got[off:off+hd], want)
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
