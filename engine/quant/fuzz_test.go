package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDequantizeRandomBytes: arbitrary bytes in every supported type decode without a
// panic, and Dequantize only reports size errors.
func TestDequantizeRandomBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for typ := Type(0); typ < 64; typ++ {
		if !CanDequantize(typ) {
			continue
		}
		for _, blocks := range []int{1, 3, 17} {
			n := blocks * typ.BlockSize()
			need, _ := RowBytes(typ, n)
			src := make([]byte, need)
			for i := range src {
				src[i] = uint8(r.Uint32())
			}
			if err := Dequantize(typ, src, make([]float32, n)); err != nil {
				t.Errorf("%s, %d blocks: %v", typ, blocks, err)
			}
		}
	}
}

// FuzzDequantize feeds arbitrary types, lengths and bytes to Dequantize: it must return an
// error or decode, never panic.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(Q4_K), uint16(256), make([]byte, 144))
	f.Add(uint8(IQ1_M), uint16(256), make([]byte, 56))
	f.Add(uint8(Q8_0), uint16(31), make([]byte, 34))
	f.Add(uint8(99), uint16(32), make([]byte, 40))
	f.Fuzz(func(t *testing.T, typ uint8, n uint16, src []byte) {
		dst := make([]float32, int(n)%4096)
		_ = Dequantize(Type(typ), src, dst)
	})
}

// FuzzQuantize: arbitrary floats (NaN, inf, huge, tiny) in every quantisable type.
func FuzzQuantize(f *testing.F) {
	f.Add(uint8(Q4_K), []byte{0, 0, 0x80, 0x7f, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, typ uint8, raw []byte) {
		T := Type(typ)
		if !CanQuantize(T) {
			return
		}
		bs := T.BlockSize()
		x := make([]float32, bs*(1+len(raw)/(4*bs)))
		for i := 0; i+4 <= len(raw) && i/4 < len(x); i += 4 {
			x[i/4] = float32frombytes(raw[i:])
		}
		need, _ := RowBytes(T, len(x))
		if err := Quantize(T, x, make([]byte, need)); err != nil {
			t.Fatal(err)
		}
	})
}

func float32frombytes(b []byte) float32 {
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}
