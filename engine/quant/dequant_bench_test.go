package quant

import (
	"os"
	"path/filepath"
	"testing"

	"strata/engine/fixtures"
)

// BenchmarkDequantize decodes a 64Ki-value row of every type in the fixture manifest (the
// fixture blocks tiled), reporting output bytes per second.
func BenchmarkDequantize(b *testing.B) {
	dir := fixtures.Path(b, "quants")
	for typ := Type(0); typ < 64; typ++ {
		if !CanDequantize(typ) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, typ.String()+".bin"))
		if err != nil {
			if typ == F32 {
				raw = make([]byte, 4*1024) // no F32 fixture: zeros decode at the same speed
			} else {
				b.Fatalf("%s: %v", typ, err)
			}
		}
		const n = 1 << 16
		need, _ := RowBytes(typ, n)
		src := make([]byte, 0, need)
		for len(src) < need {
			src = append(src, raw[:min(len(raw), need-len(src))]...)
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
