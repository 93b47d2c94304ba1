package quant

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/fixtures"
)

// fixtureType is one entry of fixtures/quants/manifest.json.
type fixtureType struct {
	GGMLType  uint32  `json:"ggml_type"`
	BlockSize int     `json:"block_size"`
	TypeSize  int     `json:"type_size"`
	NBlocks   int     `json:"n_blocks"`
	NValues   int     `json:"n_values"`
	MaxAbs    float64 `json:"max_abs"`
}

// unsupportedDequant lists fixture types we knowingly do not decode, with the reason.
// Empty: every type in the manifest must decode.
func unsupportedDequant() map[string]string { return map[string]string{} }

func loadManifest(t *testing.T) (dir string, types map[string]fixtureType) {
	t.Helper()
	dir = fixtures.Path(t, "quants")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	var m struct {
		Types map[string]fixtureType `json:"types"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("parse manifest: %v", err)
	}
	if len(m.Types) == 0 {
		t.Fatal("manifest lists no types")
	}
	return dir, m.Types
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw)%4 != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of float32", path, len(raw))
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// TestDequantizeFixtures decodes every type in the fixture manifest and compares with
// gguf-py's output: within 1e-6 of the block's largest |value|, and counts bit-exact values.
func TestDequantizeFixtures(t *testing.T) {
	dir, types := loadManifest(t)
	skip := unsupportedDequant()
	for name, ft := range types {
		t.Run(name, func(t *testing.T) {
			typ := Type(ft.GGMLType)
			if got := typ.String(); !strings.EqualFold(got, name) {
				t.Fatalf("ggml type %d is %s here, manifest says %s", ft.GGMLType, got, name)
			}
			if typ.BlockSize() != ft.BlockSize || typ.BlockBytes() != ft.TypeSize {
				t.Fatalf("geometry %d/%d, manifest %d/%d", typ.BlockSize(), typ.BlockBytes(), ft.BlockSize, ft.TypeSize)
			}
			if !CanDequantize(typ) {
				if why, ok := skip[name]; ok {
					t.Skipf("%s not decoded: %s", name, why)
				}
				t.Fatalf("%s is in the manifest but has no dequantiser", name)
			}
			src, err := os.ReadFile(filepath.Join(dir, name+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			want := readF32(t, filepath.Join(dir, name+".f32"))
			if len(want) != ft.NValues {
				t.Fatalf("%d reference values, manifest says %d", len(want), ft.NValues)
			}
			got := make([]float32, len(want))
			if err := Dequantize(typ, src, got); err != nil {
				t.Fatal(err)
			}
			bs := ft.BlockSize // 1 for F16/BF16: the tolerance is then per value
			exact, bad := 0, 0
			for b := 0; b < len(want)/bs; b++ {
				var blockMax float64
				for _, w := range want[b*bs : (b+1)*bs] {
					blockMax = math.Max(blockMax, math.Abs(float64(w)))
				}
				tol := 1e-6 * blockMax
				for k := b * bs; k < (b+1)*bs; k++ {
					if math.Float32bits(got[k]) == math.Float32bits(want[k]) {
						exact++
						continue
					}
					if math.Abs(float64(got[k])-float64(want[k])) > tol || math.IsNaN(float64(got[k])) {
						if bad < 5 {
							t.Errorf("value %d (block %d): got %g want %g (tolerance %g)", k, b, got[k], want[k], tol)
						}
						bad++
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values outside tolerance", bad, len(want))
			}
			t.Logf("%s: %d/%d values bit-exact", name, exact, len(want))
		})
	}
}

func TestDequantizeErrors(t *testing.T) {
	dst := make([]float32, 256)
	src := make([]byte, 1024)
	cases := []struct {
		name string
		typ  Type
		src  []byte
		dst  []float32
		want string
	}{
		{"unknown id", Type(99), src, dst, "unknown type id 99"},
		{"known, no decoder", Q8_K, src, dst, "Q8_K is not supported"},
		{"partial block", Q4_0, src, dst[:33], "not a whole number"},
		{"short src", Q8_0, src[:67], dst[:64], "need 68 bytes, src has 67"},
		{"short src k-quant", Q4_K, src[:143], dst, "need 144 bytes"},
	}
	for _, c := range cases {
		err := Dequantize(c.typ, c.src, c.dst)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if CanDequantize(Type(99)) || CanDequantize(Q8_1) {
		t.Error("CanDequantize reports support for types without a decoder")
	}
	// A longer src is fine: only the needed bytes are read.
	if err := Dequantize(Q8_0, src, dst[:32]); err != nil {
		t.Errorf("longer src: %v", err)
	}
}

// TestFP16Fixture checks the special values at the start of F16.bin and BF16.bin.
func TestFP16Fixture(t *testing.T) {
	dir := fixtures.Path(t, "quants")
	raw, err := os.ReadFile(filepath.Join(dir, "F16.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, float32(math.Copysign(0, -1)), 65504, -65504, 1.0 / (1 << 14), 1.0 / (1 << 24)}
	for i, w := range want {
		h := binary.LittleEndian.Uint16(raw[2*i:])
		if got := FP16ToFP32(h); math.Float32bits(got) != math.Float32bits(w) {
			t.Errorf("F16 value %d (%#04x): got %g want %g", i, h, got, w)
		}
		if back := FP32ToFP16(w); back != h {
			t.Errorf("F16 value %d: FP32ToFP16(%g) = %#04x, want %#04x", i, w, back, h)
		}
	}
	// 1e-6 and -3e-7 are subnormal halves: they decode to a multiple of 2^-24 near them.
	for i, approx := range []float64{1e-6, -3e-7} {
		h := binary.LittleEndian.Uint16(raw[2*(6+i):])
		if h&0x7c00 != 0 {
			t.Errorf("F16 value %d (%#04x) is not subnormal", 6+i, h)
		}
		if got := float64(FP16ToFP32(h)); math.Abs(got-approx) > 1.0/(1<<25) {
			t.Errorf("F16 value %d: got %g, want about %g", 6+i, got, approx)
		}
	}
	rawBF, err := os.ReadFile(filepath.Join(dir, "BF16.bin"))
	if err != nil {
		t.Fatal(err)
	}
	maxBF := math.Float32frombits(0x7f7f0000)
	minNormal := math.Float32frombits(0x00800000)
	wantBF := []float32{0, float32(math.Copysign(0, -1)), maxBF, -maxBF, minNormal, -minNormal, 1, -1}
	for i, w := range wantBF {
		h := binary.LittleEndian.Uint16(rawBF[2*i:])
		if got := BF16ToFP32(h); math.Float32bits(got) != math.Float32bits(w) {
			t.Errorf("BF16 value %d (%#04x): got %g want %g", i, h, got, w)
		}
		if back := FP32ToBF16(w); back != h {
			t.Errorf("BF16 value %d: FP32ToBF16 = %#04x, want %#04x", i, back, h)
		}
	}
}

// TestFP16RoundTrip: every half survives FP16ToFP32 then FP32ToFP16 (NaNs stay NaN).
func TestFP16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := FP16ToFP32(uint16(h))
		back := FP32ToFP16(f)
		if f != f {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

// TestFP32ToFP16Rounding checks ties to even, overflow and underflow.
func TestFP32ToFP16Rounding(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},              // halfway between 1 and next: even is 1
		{1 + 3.0/2048, 0x3c02},              // halfway, rounds up to even
		{65520, 0x7c00},                     // rounds past max to inf
		{65519, 0x7bff},                     // just below the halfway point
		{1.0 / (1 << 25), 0},                // half the smallest subnormal: ties to 0
		{1.5 / (1 << 25), 0x0001},           // above half: smallest subnormal
		{float32(math.Inf(-1)), 0xfc00},     // -inf
		{-1.0 / (1 << 30), 0x8000},          // underflow keeps the sign
		{1.0/(1<<14) - 1.0/(1<<25), 0x0400}, // rounds up from subnormal to the smallest normal
	}
	for _, c := range cases {
		if got := FP32ToFP16(c.f); got != c.want {
			t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

// TestE8M0 checks the MXFP4 scale decoding against 2^(e-128) computed in float64.
func TestE8M0(t *testing.T) {
	for e := 0; e < 255; e++ {
		want := float32(math.Ldexp(1, e-128))
		if got := E8M0ToFP32Half(uint8(e)); got != want {
			t.Errorf("E8M0ToFP32Half(%d) = %g, want %g", e, got, want)
		}
	}
}

func TestUE4M3(t *testing.T) {
	cases := []struct {
		x    uint8
		want float32
	}{
		{0x00, 0}, {0x7f, 0}, {0x38, 0.5}, {0x01, 1.0 / 1024}, {0x7e, 224}, {0x39, 0.5625}, {0xb8, 0.5},
	}
	for _, c := range cases {
		if got := ue4m3ToFP32Half(c.x); got != c.want {
			t.Errorf("ue4m3ToFP32Half(%#02x) = %g, want %g", c.x, got, c.want)
		}
	}
}

// TestUE4M3RoundTrip: every UE4M3 code below exponent 15 survives decoding and
// re-encoding; ggml's encoder sends everything from 256 up to its saturation code 0x7e.
func TestUE4M3RoundTrip(t *testing.T) {
	for c := 1; c < 0x7f; c++ {
		v := 2 * ue4m3ToFP32Half(uint8(c))
		want := uint8(c)
		if c >= 0x78 {
			want = 0x7e
		}
		if got := fp32ToUE4M3(v); got != want {
			t.Errorf("code %#02x (%g) re-encodes to %#02x, want %#02x", c, v, got, want)
		}
	}
	for _, c := range []struct {
		x    float32
		want uint8
	}{{1e9, 0x7e}, {-1, 0}, {0, 0}, {float32(math.NaN()), 0}, {1.0 / 4096, 0}} {
		if got := fp32ToUE4M3(c.x); got != c.want {
			t.Errorf("fp32ToUE4M3(%g) = %#02x, want %#02x", c.x, got, c.want)
		}
	}
}

// TestFP32ToFP16FastPath compares FP32ToFP16 with its general path on random and boundary
// float32 values.
func TestFP32ToFP16FastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	check := func(b uint32) {
		f := math.Float32frombits(b)
		if got, want := FP32ToFP16(f), fp32ToFP16Slow(f); got != want {
			t.Fatalf("FP32ToFP16(%g = %#08x) = %#04x, general path %#04x", f, b, got, want)
		}
	}
	for i := 0; i < 1<<20; i++ {
		check(r.Uint32())
	}
	for _, base := range []uint32{0x38800000, 0x47800000, 0x477fe000, 0x477ff000, 0x387fffff, 0x38000000} {
		for d := uint32(0); d < 4096; d++ {
			check(base + d - 2048)
			check((base + d - 2048) | 1<<31)
		}
	}
}
