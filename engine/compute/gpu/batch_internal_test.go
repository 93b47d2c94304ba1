package gpu

import (
	"testing"

	"strata/cuda"
)

// TestBatchScratchCountsQ8Rows: experts on the integer GEMM add the tokens' and the activated
// rows' 8-bit copies (moePrefill's quantizedSums) to what a batch reserves, by their names,
// and nothing else changes.
func TestBatchScratchCountsQ8Rows(t *testing.T) {
	for _, s := range []BatchSpec{
		{Tokens: 512, Experts: 128, ExpertsUsed: 8, Hidden: 2048, ExpertFFN: 768, Cols: 4096},
		{Tokens: 37, Experts: 32, ExpertsUsed: 4, Hidden: 2880, ExpertFFN: 2880, Cols: 4096, GemmBytes: 1 << 20},
	} {
		plain := s.ScratchBytes()
		s.ExpertsQ8 = true
		xq, hq := s.Tokens*cuda.Q8SumsRowBytes(s.Hidden), s.Tokens*s.ExpertsUsed*cuda.Q8SumsRowBytes(s.ExpertFFN)
		want := int64(xq + hq - 2*4) // ScratchBytes counts an empty buffer as 4 bytes
		if got := s.ScratchBytes() - plain; got != want {
			t.Errorf("%+v: the 8-bit rows add %d bytes, want %d", s, got, want)
		}
		sizes := map[string]int{}
		for _, b := range s.batchScratch() {
			sizes[b.name] = b.bytes
		}
		if sizes["moe x q8"] != xq || sizes["moe h q8"] != hq {
			t.Errorf("%+v: moe x q8 %d, moe h q8 %d bytes", s, sizes["moe x q8"], sizes["moe h q8"])
		}
	}
}
