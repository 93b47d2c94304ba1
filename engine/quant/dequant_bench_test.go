package quant

import (
	"os"
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
)

// BenchmarkDequantize decodes a 64Ki-value row of every supported type, reporting output
// (float32) bytes per second.
func BenchmarkDequantize(b *testing.B) {
	dir := fixtures.Path(b, "quants")
	for typ := Type(0); typ < 64; typ++ {
		if !CanDequantize(typ) {
			continue
		}
		// Real weights: N(0,1) data quantised where we can, else the fixture blocks tiled
		// (random fixture bytes hold many subnormals and NaNs, which real weights do not).
		const n = 1 << 16
		need, _ := RowBytes(typ, n)
		src := make([]byte, need)
		if CanQuantize(typ) {
			if err := Quantize(typ, gaussian(n, 1), src); err != nil {
				b.Fatal(err)
			}
		} else {
			raw, err := os.ReadFile(filepath.Join(dir, typ.String()+".bin"))
			if err != nil {
				b.Fatalf("%s: %v", typ, err)
			}
			for off := 0; off < need; off += copy(src[off:], raw) {
			}
		}
		dst := make([]float32, n)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			b.ReportAllocs()
			for b.Loop() {
				if err := Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize encodes a 64Ki-value N(0,1) row for every type with a quantiser.
func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 16
	x := gaussian(n, 5)
	for typ := Type(0); typ < 64; typ++ {
		if !CanQuantize(typ) {
			continue
		}
		need, _ := RowBytes(typ, n)
		dst := make([]byte, need)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			b.ReportAllocs()
			for b.Loop() {
				if err := Quantize(typ, x, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
