package cuda_test

import (
	"testing"

	"strata/cuda"
	"strata/engine/quant"
)

// TestTypesMatchQuant checks that the kernels' block geometry is engine/quant's (the same
// GGML ids, the same bytes per block), so the engine can hand tensors over unchanged.
func TestTypesMatchQuant(t *testing.T) {
	for _, typ := range cuda.SupportedTypes() {
		q := quant.Type(typ)
		if !q.Known() {
			t.Fatalf("%v (id %d) is not a quant type", typ, uint32(typ))
		}
		n := 2 * q.BlockSize()
		if n%8 != 0 {
			n *= 8
		}
		want, err := quant.RowBytes(q, n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := typ.RowBytes(n)
		if err != nil || got != want {
			t.Errorf("%v: RowBytes(%d) = %d, %v; engine/quant says %d", typ, n, got, err, want)
		}
	}
}
