package engine

import (
	"errors"
	"fmt"

	"strata/cuda"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
)

// defaultPrefill is the prompt tokens one forward pass takes with --prefill auto when the
// VRAM allows; a plan too tight for its activations halves it down to minPrefill.
const defaultPrefill = 512

// minPrefill is the smallest batch --prefill auto tries: below streamMinTokens no batch
// streams experts, so the streaming ring (one layer's experts) is not needed either.
const minPrefill = streamMinTokens / 2

// activationSlack covers the small buffers that grow with use and are not worth listing:
// positions, RoPE tables, the decode routing arena, a KV ring's split scratch.
const activationSlack = 8 << 20

// batchSpec is what the GPU backend's scratch depends on for batches of tokens: the experts'
// shape and whether they take the integer GEMM, the widest activation row and the largest
// float16 copy a batched product of a non-expert weight makes.
func batchSpec(f *gguf.File, h model.Hparams, tokens int) gpu.BatchSpec {
	spec := gpu.BatchSpec{Tokens: tokens, Experts: h.Experts, ExpertsUsed: h.ExpertsUsed, Hidden: h.Hidden, ExpertFFN: h.ExpertFFN}
	for _, t := range f.Tensors {
		if len(t.Ne) == 3 && cuda.QuantType(t.Type).HasGemmQ8() { // an expert stack [cols, rows, experts]
			spec.ExpertsQ8 = true
		}
		if len(t.Ne) != 2 || t.Name == "token_embd.weight" { // embeddings are looked up by row
			continue
		}
		spec.Cols = max(spec.Cols, int(t.Ne[0]))
		spec.GemmBytes = max(spec.GemmBytes, gpu.GemmScratchBytes(t.Type, int(t.Ne[1]), int(t.Ne[0])))
	}
	return spec
}

// sessionActivationBytes is what a session takes beside its KV cache for batches of tokens:
// the forward pass's scratch and logits row (model.Hparams.ScratchFloats, reserved at the
// session's first use), the expert cache's device copy of the misses' outputs, the split
// attention's scratch and the slack.
func sessionActivationBytes(h model.Hparams, tokens int) int64 {
	return 4*int64(h.ScratchFloats(tokens)) + 4*int64(tokens*h.Hidden) +
		int64(cuda.AttentionDecodeScratchBytes(h.Heads, h.HeadDim, cuda.DecodeSplits(1<<30, h.Heads, h.KVHeads))) + activationSlack
}

// activationBytesFor is the VRAM a plan keeps for activations with prefill batches of tokens:
// the session's share and the backend's scratch (gpu.Backend.Reserve).
func activationBytesFor(f *gguf.File, h model.Hparams, tokens int) int64 {
	return sessionActivationBytes(h, tokens) + batchSpec(f, h, tokens).ScratchBytes()
}

// prefillBatches are the batches a plan tries: --prefill's, or with auto defaultPrefill
// halved down to minPrefill. Expert slots asked for by number keep the default batch: a
// smaller one would make room for them silently, where the refusal names both knobs.
func prefillBatches(cfg Config) []int {
	if cfg.Prefill > 0 {
		return []int{cfg.Prefill}
	}
	if cfg.ExpertCache != Auto {
		return []int{defaultPrefill}
	}
	var bs []int
	for b := defaultPrefill; b >= minPrefill; b /= 2 {
		bs = append(bs, b)
	}
	return bs
}

// batchPlan is a plan with the prefill batch its activations were sized for.
type batchPlan struct {
	plan  experts.Plan
	batch int
	ring  int // streaming ring slots inside the activations
}

// planBatch plans in with the activations of the largest prefill batch that fits (see
// prefillBatches): the batch's scratch, and the streaming ring when ring is set and the
// batch is large enough to stream. Without a GPU the activations are the session's, in RAM.
// A budget too small even for the smallest batch is that batch's error.
func planBatch(f *gguf.File, h model.Hparams, in experts.PlanInput, cfg Config, ring bool) (batchPlan, error) {
	var err error
	for _, b := range prefillBatches(cfg) {
		try := in
		try.Batch = b
		slots := 0
		try.ActivationBytes = sessionActivationBytes(h, b) // in RAM without a GPU
		if in.GPUFreeBytes > 0 {
			try.ActivationBytes = activationBytesFor(f, h, b)
			if ring && b >= streamMinTokens {
				slots = streamRingSlots(in.Shape)
				try.ActivationBytes += int64(slots) * in.Shape.BlobBytes()
			}
			try.ActivationBytes += expertBiasDeviceBytes(f, in.Shape, slots)
		}
		var p experts.Plan
		p, err = experts.MakePlan(try)
		if err == nil {
			if cfg.Prefill <= 0 && b < defaultPrefill {
				p.Notes = append(p.Notes, fmt.Sprintf("--prefill auto: prompts run in batches of %d tokens, the most whose activations fit the VRAM (%d would not)", b, 2*b))
			}
			return batchPlan{plan: p, batch: b, ring: slots}, nil
		}
		if !errors.Is(err, experts.ErrBudgetTooSmall) {
			return batchPlan{}, err
		}
	}
	return batchPlan{}, err
}
