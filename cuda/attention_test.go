package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// refAttention is one query head against positions 0..last of f16 caches [pos][nKV][hd].
func refAttention(q []float32, kc, vc []float32, kvh, nKV, hd, last int, scale float64) []float64 {
	s := make([]float64, last+1)
	mx := math.Inf(-1)
	for p := 0; p <= last; p++ {
		d := 0.0
		for i := 0; i < hd; i++ {
			d += float64(q[i]) * float64(kc[(p*nKV+kvh)*hd+i])
		}
		s[p] = d * scale
		mx = math.Max(mx, s[p])
	}
	sum := 0.0
	for p := range s {
		s[p] = math.Exp(s[p] - mx)
		sum += s[p]
	}
	out := make([]float64, hd)
	for p := range s {
		for i := 0; i < hd; i++ {
			out[i] += s[p] / sum * float64(vc[(p*nKV+kvh)*hd+i])
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

func TestAttention(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(23, 24))
	const ctxLen, nHead, nKV = 300, 8, 2
	for _, hd := range []int{64, 128, 256} {
		kh := toF16(randFloats(r, ctxLen*nKV*hd, 1))
		vh := toF16(randFloats(r, ctxLen*nKV*hd, 1))
		kf, vf := fromF16(kh), fromF16(vh)
		dk, dv := upload(t, g, kh), upload(t, g, vh)
		scale := 1 / math.Sqrt(float64(hd))
		for _, nSplit := range []int{1, 3, 8} {
			scratch := cuda.DevicePtr(0)
			if b := cuda.AttentionDecodeScratchBytes(nHead, hd, nSplit); b > 0 {
				scratch = g.buf(t, b)
			}
			for _, last := range []int{0, 5, 31, 32, 200, ctxLen - 1} {
				q := randFloats(r, nHead*hd, 1)
				dq, dpos := upload(t, g, q), upload(t, g, []int32{int32(last)})
				dout := g.buf(t, 4*nHead*hd)
				if err := g.k.AttentionDecode(g.s, dq, dk, dv, dout, dpos, nHead, nKV, hd, float32(scale), nSplit, scratch); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dout, nHead*hd)
				for h := 0; h < nHead; h++ {
					want := refAttention(q[h*hd:(h+1)*hd], kf, vf, h/(nHead/nKV), nKV, hd, last, scale)
					checkAttention(t, fmt.Sprintf("decode hd=%d pos=%d splits=%d head %d", hd, last, nSplit, h), got[h*hd:(h+1)*hd], want)
				}
			}
		}
		// prefill: 17 tokens at positions 40..56 plus a batch starting at 0
		for _, start := range []int{0, 40, 250} {
			const nTok = 17
			pos := make([]int32, nTok)
			for i := range pos {
				pos[i] = int32(start + i)
			}
			q := randFloats(r, nTok*nHead*hd, 1)
			dq, dpos := upload(t, g, q), upload(t, g, pos)
			dout := g.buf(t, 4*nTok*nHead*hd)
			if err := g.k.AttentionPrefill(g.s, dq, dk, dv, dout, dpos, nTok, nHead, nKV, hd, float32(scale)); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, g, dout, nTok*nHead*hd)
			for tk := 0; tk < nTok; tk++ {
				for h := 0; h < nHead; h++ {
					off := (tk*nHead + h) * hd
					want := refAttention(q[off:off+hd], kf, vf, h/(nHead/nKV), nKV, hd, int(pos[tk]), scale)
					checkAttention(t, fmt.Sprintf("prefill hd=%d token %d (pos %d) head %d", hd, tk, pos[tk], h), got[off:off+hd], want)
				}
			}
		}
	}
}
