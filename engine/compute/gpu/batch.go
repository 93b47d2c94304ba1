package gpu

import (
	"fmt"

	"strata/cuda"
	"strata/engine/quant"
)

// BatchSpec is the largest batch the backend will run and the shapes its scratch depends on:
// the planner counts what it takes (ScratchBytes) and Reserve allocates it up front, so the
// VRAM a budget was planned with is the VRAM the backend takes.
type BatchSpec struct {
	Tokens      int // the most tokens one forward pass runs (the prefill batch)
	Experts     int // routed experts per layer
	ExpertsUsed int // experts per token
	Hidden      int // the experts' input and output width
	ExpertFFN   int // the experts' inner width
	// Cols is the widest activation row a decode step quantises to 8 bits.
	Cols int
	// GemmBytes is the largest float16 copy a batched product of a non-expert weight makes
	// (GemmScratchBytes over those weights).
	GemmBytes int64
	// ExpertsQ8 says some expert matrix takes the integer GEMM (cuda.HasGemmQ8), whose
	// batches quantise the tokens and the activated rows first (quantizedSums).
	ExpertsQ8 bool
}

// GemmScratchBytes is the float16 copy of a rows x cols weight of type t that a batched
// product dequantises into first; 0 when the product needs none (float16 weights, or
// weights too big to copy, which are decoded tile by tile).
func GemmScratchBytes(t quant.Type, rows, cols int) int64 {
	n := cuda.GemmScratchBytes(cuda.QuantType(t), rows, cols)
	if n > gemmScratchLimit {
		return 0
	}
	return int64(n)
}

// scratchSize is one named scratch buffer and its size for a batch.
type scratchSize struct {
	name  string
	bytes int
}

// batchScratch lists the named scratch buffers a batch of s.Tokens grows: the grouped MoE
// product's (moePrefill, with its 8-bit rows when ExpertsQ8), the batch routes (Route), the
// token ids (Embed), the 8-bit activations of decode (quantized, moeDecode) and the
// dequantised weight of a GEMM.
func (s BatchSpec) batchScratch() []scratchSize {
	n := max(s.Tokens, 1)
	slots := n * s.ExpertsUsed
	H, F, E := s.Hidden, s.ExpertFFN, s.Experts
	var xq, hq int
	if s.ExpertsQ8 {
		xq, hq = n*cuda.Q8SumsRowBytes(H), slots*cuda.Q8SumsRowBytes(F)
	}
	return []scratchSize{
		{"moe x q8", xq},
		{"moe h q8", hq},
		{"moe index", 4 * (2*min(E, slots) + 1 + 5*slots)},
		{"moe gate", 4 * slots * F},
		{"moe up", 4 * slots * F},
		{"moe sorted out", 4 * slots * H},
		{"moe out", 4 * slots * H},
		{"route ids", 4 * slots},
		{"route weights", 4 * slots},
		{"ids", 4 * n},
		{"q8 x", cuda.Q8RowBytes(max(s.Cols, H, F))},
		{"q8 h", s.ExpertsUsed * cuda.Q8RowBytes(F)},
		{"gemm", int(s.GemmBytes)},
	}
}

// ScratchBytes is the VRAM the backend's own scratch takes for batches up to s.Tokens once
// Reserve has sized it.
func (s BatchSpec) ScratchBytes() int64 {
	var t int64
	for _, b := range s.batchScratch() {
		t += int64(max(b.bytes, 4))
	}
	return t
}

// Reserve allocates the scratch for batches up to s.Tokens now. Scratch grows on demand and
// a grown buffer leaves the smaller one allocated (a captured step may still name it), so
// without this a short prompt followed by a long one would take both.
func (b *Backend) Reserve(s BatchSpec) error {
	for _, sc := range s.batchScratch() {
		if sc.bytes > 0 && b.scratchBuf(sc.name, sc.bytes) == 0 {
			return fmt.Errorf("gpu: scratch for batches of %d tokens: %w", s.Tokens, b.err.Take())
		}
	}
	return nil
}
