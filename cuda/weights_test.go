package cuda_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"strata/cuda"
	"strata/engine/fixtures"
	"strata/engine/quant"
)

// blockSet is one type's reference blocks: raw bytes and gguf-py's dequantisation.
type blockSet struct {
	qk, bytes int
	raw       []byte
	values    []float32
}

func (b blockSet) count() int { return len(b.raw) / b.bytes }

// loadBlocks reads fixtures/quants/<TYPE>.{bin,f32}: random blocks with sane scales,
// decoded by a third-party implementation.
func loadBlocks(t testing.TB, typ cuda.QuantType) blockSet {
	t.Helper()
	name := strings.ToUpper(typ.String())
	raw, err := os.ReadFile(fixtures.Path(t, "quants", name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.ReadFile(fixtures.Path(t, "quants", name+".f32"))
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, len(fb)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(fb[4*i:]))
	}
	qt := quant.Type(typ)
	bs := blockSet{qk: qt.BlockSize(), bytes: qt.BlockBytes(), raw: raw, values: vals}
	if bs.count()*bs.qk != len(vals) || len(raw)%bs.bytes != 0 {
		t.Fatalf("fixture %s: %d bytes and %d values do not match %d-byte blocks of %d", name, len(raw), len(vals), bs.bytes, bs.qk)
	}
	return bs
}

// makeWeights returns rows x cols weights of type typ in GGUF layout and their float
// values: fixture blocks picked at random for the block types, random values for the
// plain ones.
func makeWeights(t testing.TB, r *rand.Rand, typ cuda.QuantType, rows, cols int) ([]byte, []float32) {
	t.Helper()
	n := rows * cols
	vals := make([]float32, n)
	switch typ {
	case cuda.F32:
		raw := make([]byte, 4*n)
		for i := range vals {
			vals[i] = float32(r.Float64()*2 - 1)
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(vals[i]))
		}
		return raw, vals
	case cuda.F16, cuda.BF16:
		raw := make([]byte, 2*n)
		for i := range vals {
			f := float32(r.Float64()*2 - 1)
			var h uint16
			if typ == cuda.F16 {
				h = quant.FP32ToFP16(f)
				vals[i] = quant.FP16ToFP32(h)
			} else {
				h = quant.FP32ToBF16(f)
				vals[i] = quant.BF16ToFP32(h)
			}
			binary.LittleEndian.PutUint16(raw[2*i:], h)
		}
		return raw, vals
	}
	bs := loadBlocks(t, typ)
	if cols%bs.qk != 0 {
		t.Fatalf("%v: %d columns is not a whole number of blocks", typ, cols)
	}
	nb := n / bs.qk
	raw := make([]byte, 0, nb*bs.bytes)
	for b := 0; b < nb; b++ {
		pick := r.IntN(bs.count())
		raw = append(raw, bs.raw[pick*bs.bytes:(pick+1)*bs.bytes]...)
		copy(vals[b*bs.qk:], bs.values[pick*bs.qk:(pick+1)*bs.qk])
	}
	return raw, vals
}

// blockOf is the number of values per block of typ as the kernels see it.
func blockOf(typ cuda.QuantType) int {
	switch typ {
	case cuda.F32, cuda.F16, cuda.BF16:
		return 8
	}
	return quant.Type(typ).BlockSize()
}
