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
		int64(cuda.AttentionDecodeScratchBytes(h.Heads, h.HeadDim, max(cuda.DecodeSplits(1<<30, h.Heads, h.KVHeads), cuda.DecodeSplitsMMA(1<<30, h.Heads, h.KVHeads)))) + activationSlack
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
// prefillBatches), or a larger one while experts stream (streamPrefill). Without a GPU the
// activations are the session's, in RAM. A budget too small even for the smallest batch is
// that batch's error.
func planBatch(f *gguf.File, h model.Hparams, in experts.PlanInput, cfg Config, ring bool) (batchPlan, error) {
	var err error
	for _, b := range prefillBatches(cfg) {
		var bp batchPlan
		bp, err = planAt(f, h, in, b, ring)
		if err == nil {
			if cfg.Prefill <= 0 && b < defaultPrefill {
				bp.plan.Notes = append(bp.plan.Notes, fmt.Sprintf("--prefill auto: prompts run in batches of %d tokens, the most whose activations fit the VRAM (%d would not)", b, 2*b))
			}
			return streamPrefill(f, h, in, cfg, ring, bp), nil
		}
		if !errors.Is(err, experts.ErrBudgetTooSmall) {
			return batchPlan{}, err
		}
	}
	return batchPlan{}, err
}

// planAt plans in with the activations of batches of b tokens: the batch's scratch, and
// the streaming ring when ring is set and the batch is large enough to stream.
func planAt(f *gguf.File, h model.Hparams, in experts.PlanInput, b int, ring bool) (batchPlan, error) {
	in.Batch = b
	slots := 0
	in.ActivationBytes = sessionActivationBytes(h, b) // in RAM without a GPU
	if in.GPUFreeBytes > 0 {
		in.ActivationBytes = activationBytesFor(f, h, b)
		if ring && b >= streamMinTokens {
			slots = streamRingSlots(in.Shape)
			in.ActivationBytes += int64(slots) * in.Shape.BlobBytes()
		}
		in.ActivationBytes += expertBiasDeviceBytes(f, in.Shape, slots)
	}
	p, err := experts.MakePlan(in)
	if err != nil {
		return batchPlan{}, err
	}
	return batchPlan{plan: p, batch: b, ring: slots}, nil
}

// streamBatches are the larger batches --prefill auto tries while experts stream, the
// largest first.
func streamBatches() []int { return []int{4 * defaultPrefill, 2 * defaultPrefill} }

// streamSlotSharePct is the most a larger prefill batch may cost of the default batch's
// VRAM expert slots, in percent. Every batch of streamMinTokens or more uploads each
// non-VRAM expert it routes to once per layer, and a large batch routes to most of a
// layer's experts, so the uploads fall with the number of batches: on the H200,
// qwen3next-80b-a3b IQ3_XXS's 32k prompt under --vram-budget-mib 14000 streamed 936,006
// experts in batches of 512, 108.9 s of its 130 s prefill. The activations
// (activationBytesFor, the synth presets' shapes) at 512/1024/2048/4096 tokens are
// 154/281/536/1046 MiB for 30b-a3b (2.53 MiB Q4_K experts) and 236/427/810/1575 MiB for
// qwen3next-80b-a3b (1.15 MiB IQ3_XXS experts); at --vram-budget-mib 14000 batches of 1024
// cost 50 of 30b-a3b's 4,695 slots (1.1%) and 167 of qwen3next's 10,454 (1.6%), 2048 cost
// 151 (3.2%) and 500 (4.8%). 2% takes 1024 there, halving the uploads for the coldest of
// the VRAM experts; 2048 needs a cache of 50 times its cost, more slots than either model
// has experts, so it is for models whose activations are small beside their experts.
const streamSlotSharePct = 2

// slotsAfford says whether a plan of slots VRAM expert slots gives up at most
// streamSlotSharePct percent of base's.
func slotsAfford(base, slots int) bool {
	return slots >= 0 && 100*(base-slots) <= streamSlotSharePct*base
}

// streamPrefill is the batch a --prefill auto plan on a GPU takes while experts stream (some
// not in VRAM, so each prompt batch uploads the ones it routes to): the largest of
// streamBatches whose plan fits and costs at most streamSlotSharePct of base's expert
// slots, so long prompts upload each layer's experts fewer times. Otherwise, and for
// --prefill N, expert slots by number, a base below the default batch (a tight budget),
// every expert in VRAM or no GPU, it is base.
func streamPrefill(f *gguf.File, h model.Hparams, in experts.PlanInput, cfg Config, ring bool, base batchPlan) batchPlan {
	p := base.plan
	streamed := p.Shape.Count() - p.Slots - p.HelperSlots[0] - p.HelperSlots[1] // helpers compute theirs in place
	if cfg.Prefill > 0 || cfg.ExpertCache != Auto || !ring || in.GPUFreeBytes <= 0 || base.batch != defaultPrefill || streamed <= 0 {
		return base
	}
	for _, b := range streamBatches() {
		bp, err := planAt(f, h, in, b, ring)
		if err != nil || !slotsAfford(p.Slots, bp.plan.Slots) {
			continue
		}
		bp.plan.Notes = append(bp.plan.Notes, fmt.Sprintf("--prefill auto: prompts run in batches of %d tokens while experts stream (%d of %d are not in VRAM), uploading each fewer times; its activations cost %d of the %d expert slots batches of %d would leave (at most %d%%)",
			b, streamed, p.Shape.Count(), p.Slots-bp.plan.Slots, p.Slots, defaultPrefill, streamSlotSharePct))
		return bp
	}
	p.Notes = append(p.Notes, fmt.Sprintf("--prefill auto: prompts run in batches of %d tokens while experts stream: the activations of %d would not fit or would cost more than %d%% of the %d expert slots", defaultPrefill, 2*defaultPrefill, streamSlotSharePct, p.Slots))
	base.plan = p
	return base
}
