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

// refAttention is one query head against positions first..last of f16 caches
// [slot][nKV][hd], in float64, with the head's sink logit (nil: none) in the denominator.
func refAttention(q []float32, kc, vc []float32, kvh, nKV, hd, last int, scale float64, c attCase, sink *float32) []float64 {
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
			d += float64(q[i]) * float64(kc[(slot(p)*nKV+kvh)*hd+i])
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
			out[i] += s[p] / sum * float64(vc[(slot(p)*nKV+kvh)*hd+i])
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

// TestAttention runs decode (with and without split-K) and prefill on random data against
// the float64 reference, over head sizes that tile a warp exactly and ones that do not,
// with sinks, sliding windows and ring layouts.
func TestAttention(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(23, 24))
	const ctxLen, nHead, nKV = 300, 8, 2
	var cases []attCase
	for _, hd := range []int{16, 32, 48, 64, 80, 128, 208, 256} {
		cases = append(cases, attCase{hd: hd}, attCase{hd: hd, sinks: true}, attCase{hd: hd, sinks: true, window: 8},
			attCase{hd: hd, window: 24, ring: 41}, attCase{hd: hd, sinks: true, window: 8, ring: 24})
	}
	for _, c := range cases {
		hd := c.hd
		slots := ctxLen
		if c.ring > 0 {
			slots = c.ring
		}
		kh := toF16(randFloats(r, slots*nKV*hd, 1))
		vh := toF16(randFloats(r, slots*nKV*hd, 1))
		kf, vf := fromF16(kh), fromF16(vh)
		dk, dv := upload(t, g, kh), upload(t, g, vh)
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
		name := fmt.Sprintf("hd=%d sinks=%v window=%d ring=%d", hd, c.sinks, c.window, c.ring)
		for _, nSplit := range []int{1, 3, 8} {
			scratch := cuda.DevicePtr(0)
			if b := cuda.AttentionDecodeScratchBytes(nHead, hd, nSplit); b > 0 {
				scratch = g.buf(t, b)
			}
			for _, last := range []int{0, 5, 31, 32, 200, ctxLen - 1} {
				q := randFloats(r, nHead*hd, 1)
				dq, dpos := upload(t, g, q), upload(t, g, []int32{int32(last)})
				dout := g.buf(t, 4*nHead*hd)
				if err := g.k.AttentionDecode(g.s, dq, dk, dv, dout, dpos, nHead, nKV, hd, float32(scale), nSplit, scratch, opts); err != nil {
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
			if err := g.k.AttentionPrefill(g.s, dq, dk, dv, dout, dpos, nTok, nHead, nKV, hd, float32(scale), opts); err != nil {
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
