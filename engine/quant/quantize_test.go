package quant

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func gaussian(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func roundTrip(t *testing.T, typ Type, x []float32) []float32 {
	t.Helper()
	n, err := RowBytes(typ, len(x))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, n)
	if err := Quantize(typ, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatal(err)
	}
	return y
}

func relRMS(x, y []float32) float64 {
	var se, sx float64
	for i := range x {
		d := float64(y[i]) - float64(x[i])
		se += d * d
		sx += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(se / sx)
}

// TestQuantizeError quantises N(0,1) data and checks RMS(error)/RMS(x). The bounds sit a
// little above what the reference algorithms reach (measured values in the comments), so
// a broken search or packing shows up, not just a total failure.
func TestQuantizeError(t *testing.T) {
	cases := []struct {
		typ   Type
		bound float64
	}{
		{F16, 0.00025},  // measured 0.00021
		{BF16, 0.0019},  // 0.00168
		{Q8_0, 0.0059},  // 0.00537
		{Q6_K, 0.0195},  // 0.01785
		{Q5_1, 0.041},   // 0.03783
		{Q5_0, 0.046},   // 0.04223
		{Q5_K, 0.039},   // 0.03610
		{Q4_1, 0.085},   // 0.07833
		{Q4_0, 0.094},   // 0.08596
		{Q4_K, 0.077},   // 0.07130
		{Q3_K, 0.165},   // 0.15120
		{Q2_K, 0.32},    // 0.29479
		{IQ4_NL, 0.082}, // 0.07582
		{IQ4_XS, 0.082}, // 0.07638
		{MXFP4, 0.125},  // 0.11523
		{NVFP4, 0.105},  // 0.09497
		// The grid types' quantisers are simpler than ggml's searches; ggml's figures on
		// the same data (libggml-base's ggml_quantize_chunk, no imatrix / all-ones imatrix)
		// follow each measured value.
		{IQ3_S, 0.145},   // 0.13386; ggml 0.16574 / 0.13767
		{IQ3_XXS, 0.204}, // 0.18835; ggml 0.21257 / 0.18099
		{IQ2_S, 0.276},   // 0.25485; ggml 0.26667 / 0.25092
		{IQ2_XS, 0.328},  // 0.30337; ggml needs an imatrix / 0.30233
		{IQ2_XXS, 0.381}, // 0.35284; ggml needs an imatrix / 0.34508
		{TQ1_0, 0.85},    // 0.80210: ternary weights fit Gaussian data badly
		{TQ2_0, 0.85},    // 0.80210
	}
	x := gaussian(64*QK_K, 42)
	for _, c := range cases {
		t.Run(c.typ.String(), func(t *testing.T) {
			e := relRMS(x, roundTrip(t, c.typ, x))
			t.Logf("%s: RMS error / RMS x = %.5f (bound %.4f)", c.typ, e, c.bound)
			if e > c.bound {
				t.Errorf("%s: relative RMS error %.5f above %.4f", c.typ, e, c.bound)
			}
		})
	}
}

// TestQuantizeSearchHelps: the k-quant and IQ4_NL searches beat the plain min/max
// quantisers of the same bit width on the same data, as ggml's do.
func TestQuantizeSearchHelps(t *testing.T) {
	x := gaussian(64*QK_K, 11)
	pairs := [][2]Type{{Q4_K, Q4_1}, {Q5_K, Q5_1}, {IQ4_NL, Q4_0}}
	for _, p := range pairs {
		better, plain := relRMS(x, roundTrip(t, p[0], x)), relRMS(x, roundTrip(t, p[1], x))
		if better >= plain {
			t.Errorf("%s error %.5f is not below %s's %.5f", p[0], better, p[1], plain)
		}
	}
}

// TestQuantizeExact: values the format holds exactly come back unchanged.
func TestQuantizeExact(t *testing.T) {
	const d = 0.03125 // exact in fp16
	mk := func(n int, f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	cases := []struct {
		typ Type
		x   []float32
	}{
		// Q8_0: k*d for k in -127..127 with +-127 present in every block.
		{Q8_0, mk(64, func(i int) float32 { return float32((i*37)%255-127) * d })},
		// Q4_0: (q-8)*d, the value of largest magnitude being -8*d.
		{Q4_0, mk(64, func(i int) float32 {
			if i%32 == 5 {
				return -8 * d
			}
			return float32(i%16-8) * d
		})},
		// Q5_0: (q-16)*d, the largest magnitude being -16*d.
		{Q5_0, mk(64, func(i int) float32 {
			if i%32 == 7 {
				return -16 * d
			}
			return float32(i%32-16) * d
		})},
		// Q4_1 / Q5_1: min + q*d over the full range 0..15 / 0..31.
		{Q4_1, mk(64, func(i int) float32 { return -1 + float32(i%16)*d })},
		{Q5_1, mk(64, func(i int) float32 { return -1 + float32(i%32)*d })},
		// MXFP4: codebook values times 2^-3, 6*2^-3 present.
		{MXFP4, mk(64, func(i int) float32 {
			v := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6}
			return v[i%15] / 8
		})},
		// NVFP4: codebook values times 0.25 (exact in UE4M3), 6*0.25 in every 16 values.
		{NVFP4, mk(64, func(i int) float32 {
			v := []float32{6, 0.5, 1, 1.5, 2, 3, 4, 0, -0.5, -1, -1.5, -2, -3, -4, -6, 6}
			return v[i%16] / 4
		})},
		{F16, []float32{0, 1, -2, 65504, 1.0 / (1 << 24), -0.333251953125}},
		{BF16, []float32{0, 1, -2, 1.5, -3.3895313892515355e+38, float32(math.Ldexp(1, -126))}},
	}
	for _, c := range cases {
		y := roundTrip(t, c.typ, c.x)
		for i := range c.x {
			if y[i] != c.x[i] {
				t.Errorf("%s: value %d: got %g want %g", c.typ, i, y[i], c.x[i])
				break
			}
		}
	}
}

// TestQuantizeZeros: an all-zero row encodes to a block that decodes to zeros.
func TestQuantizeZeros(t *testing.T) {
	for typ := Type(0); typ < 64; typ++ {
		if !CanQuantize(typ) {
			continue
		}
		x := make([]float32, 2*QK_K)
		y := roundTrip(t, typ, x)
		for i, v := range y {
			if v != 0 || math.IsNaN(float64(v)) {
				t.Errorf("%s: zero row decodes to %g at %d", typ, v, i)
				break
			}
		}
	}
}

// TestQuantizeMixedScales: blocks of very different magnitude in one row each keep their
// own precision (catches a scale shared across blocks by mistake).
func TestQuantizeMixedScales(t *testing.T) {
	x := gaussian(4*QK_K, 7)
	for i := range x {
		if (i/QK_K)%2 == 1 {
			x[i] *= 1e-3
		}
	}
	for typ := Type(0); typ < 64; typ++ {
		// NVFP4's UE4M3 block scales stop at 2^-9, so ggml's quantiser flushes blocks
		// under ~1e-2 to zero; real NVFP4 tensors carry a per-tensor scale for that.
		if !CanQuantize(typ) || typ == F32 || typ == NVFP4 {
			continue
		}
		y := roundTrip(t, typ, x)
		var eBig, eSmall float64
		for b := 0; b < 4; b++ {
			e := relRMS(x[b*QK_K:(b+1)*QK_K], y[b*QK_K:(b+1)*QK_K])
			if b%2 == 0 {
				eBig = max(eBig, e)
			} else {
				eSmall = max(eSmall, e)
			}
		}
		if eSmall > 1.5*eBig+1e-3 {
			t.Errorf("%s: relative error %.4f on small blocks against %.4f on large ones", typ, eSmall, eBig)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	x := make([]float32, 64)
	cases := []struct {
		name string
		typ  Type
		x    []float32
		dst  []byte
		want string
	}{
		{"unknown id", Type(77), x, make([]byte, 68), "unknown type id 77"},
		{"no quantiser", IQ1_S, make([]float32, 256), make([]byte, 50), "IQ1_S is not supported"},
		{"partial block", Q8_0, x[:40], make([]byte, 68), "not a whole number"},
		{"wrong dst", Q8_0, x, make([]byte, 67), "take 68 bytes, dst has 67"},
		{"k-quant partial", Q4_K, x, make([]byte, 144), "not a whole number"},
	}
	for _, c := range cases {
		err := Quantize(c.typ, c.x, c.dst)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestQuantizeNonFinite: NaN and inf inputs give some block, never a panic.
func TestQuantizeNonFinite(t *testing.T) {
	x := gaussian(QK_K, 3)
	x[3] = float32(math.NaN())
	x[100] = float32(math.Inf(1))
	x[200] = float32(math.Inf(-1))
	for typ := Type(0); typ < 64; typ++ {
		if !CanQuantize(typ) {
			continue
		}
		n, _ := RowBytes(typ, len(x))
		if err := Quantize(typ, x, make([]byte, n)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}
