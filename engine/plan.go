package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/kv"
	"strata/engine/model"
	"strata/platform"
)

// minPlanContext is the KV cache a plan keeps room for when --max-context is not given: a
// chat with a thinking model runs past 2k tokens quickly, and 8k of a 30b-a3b cache cost
// about 800 MiB, some 300 of its 6,144 expert slots.
const minPlanContext = 8192

// PlanFor says where each expert of the model at path would go with cfg on this machine:
// the VRAM slots, every expert's tier, bytes per tier and the context left for the KV cache.
// It reads the header only and loads no weights. The machine's free VRAM (main GPU) and
// available RAM come from the platform probes; --backend cpu plans without a GPU.
func PlanFor(ctx context.Context, path string, cfg Config) (experts.Plan, ModelInfo, error) {
	return PlanForMachine(ctx, path, cfg, Machine{})
}

// Machine stands in for what PlanFor probes, to plan for another machine than this one (a
// card you are thinking of buying, a laptop). Zero fields are probed.
type Machine struct {
	GPUFreeBytes int64 // free VRAM on the main GPU
	// HelperFreeBytes is the free VRAM of helper GPUs 1 and 2, read only with GPUFreeBytes
	// given (0: not known, the helper slots are planned unchecked).
	HelperFreeBytes [2]int64
	HostAvailBytes  int64 // available RAM
}

// PlanForMachine is PlanFor with the machine's numbers given instead of probed.
func PlanForMachine(ctx context.Context, path string, cfg Config, mc Machine) (experts.Plan, ModelInfo, error) {
	if err := cfg.Validate(); err != nil {
		return experts.Plan{}, ModelInfo{}, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return experts.Plan{}, ModelInfo{}, err
	}
	defer f.Close()
	info, err := describe(f)
	if err != nil {
		return experts.Plan{}, ModelInfo{}, err
	}
	if err := checkContextLimit(cfg, info); err != nil {
		return experts.Plan{}, info, err
	}
	s, err := expertShape(f, info)
	if err != nil {
		return experts.Plan{}, info, err
	}
	hw, err := probePlanHardware(ctx, cfg, info, mc)
	if err != nil {
		return experts.Plan{}, info, err
	}
	notes := hw.notes
	var rank []experts.ID
	if p, at := loadProfile(f, s); p != nil {
		rank = p.Rank()
		notes = append(notes, fmt.Sprintf("expert order from the profile %s (%d tokens)", at, p.Tokens))
	} else {
		notes = append(notes, "no expert profile: the neutral order (record one with strata profile; the engine also learns one from use)")
	}
	in := planInput(info, s, hw.gpuFree, hw.hostAvail, cfg, rank)
	in.HelperFreeBytes = hw.helperFree
	tiered := hw.gpuFree > 0 && !fitsWhole(cfg, info, hw.gpuFree)
	in.HostWeightBytes = plannedHostWeights(f, newPinBudget(cfg, detectWSL(), hw.gpuFree > 0), tiered)
	if n := pinsImplicitlyNote(cfg, hw.gpuFree > 0); n != "" {
		notes = append(notes, n)
	}
	h, err := model.ReadHparams(f)
	if err != nil {
		return experts.Plan{}, info, err
	}
	bp, err := planBatch(f, h, in, cfg, hw.gpuFree > 0)
	if err != nil {
		return experts.Plan{}, info, fmt.Errorf("%s: %w", path, err)
	}
	plan := bp.plan
	plan.Notes = append(notes, plan.Notes...)
	return plan, info, nil
}

// streamRingSlots is the number of staging slots Open's tiered placement adds to the
// activations for streaming experts that are not in VRAM to the GPU during prefill: at most
// maxRingSlots of a layer's experts.
func streamRingSlots(s experts.Shape) int { return min(s.Experts, maxRingSlots) }

// maxRingSlots caps the streaming ring. Decode never uses it, and every slot it takes is
// one the expert cache does not get: at 128 (a whole q30b layer) it took 324 MiB of q30b's
// 8913 MiB budget. On the H200 (cuda/BENCH.md, session 22) rings of 64 and 32 slots gave
// decode 111.2 and 111.4 tok/s against 109.5 at 128, and a 512-token prompt no slower. A
// round is half the ring (the other half is being filled), so 32 keeps rounds of 16
// experts: 40 MiB of copies for q30b, 19 MiB for qwen3next's, each far longer than a
// round's sync, so long prompts still overlap their copies with the MoE.
const maxRingSlots = 32

// expertBiasDeviceBytes is what a model whose experts have biases (gpt-oss) keeps of them
// on the GPU beside the slots' matrices: a float32 set of gate, up and down bias rows for
// each VRAM slot, each pinned expert the GPU reads over PCIe (one set per expert at most)
// and each of the ring's slots. The planner counts a slot as its blob only, so without
// these a plan that fills the budget to the last slot fails at load; 0 without biases.
func expertBiasDeviceBytes(f *gguf.File, s experts.Shape, ringSlots int) int64 {
	var bias int64 // one expert's bias rows as float32, the widest layer's
	for l := range s.Layers {
		var per int64
		for _, m := range []string{"gate", "up", "down"} {
			if t, ok := f.Tensor(fmt.Sprintf("blk.%d.ffn_%s_exps.bias", l, m)); ok {
				per += 4 * t.Elements() / int64(max(s.Experts, 1))
			}
		}
		bias = max(bias, per)
	}
	return bias * int64(s.Count()+ringSlots)
}

// planInput turns the model's sizes, the machine's free memory and the knobs into the
// planner's input, all but the activations, which depend on the prefill batch (planBatch).
// gpuFree 0 means no usable GPU. Open calls it with the real backend's free VRAM.
func planInput(info ModelInfo, s experts.Shape, gpuFree, hostAvail int64, cfg Config, rank []experts.ID) experts.PlanInput {
	modelCtx := max(info.ContextLimit, info.ContextLength) // a hand-made ModelInfo may give only the trained length
	if modelCtx <= 0 {
		modelCtx = 4096 // what kv.ContextFor assumes for a model that does not say
	}
	minCtx := min(minPlanContext, modelCtx)
	if cfg.MaxContext > 0 {
		modelCtx, minCtx = cfg.MaxContext, cfg.MaxContext
	}
	gib := func(g float64) int64 { return int64(g * (1 << 30)) }
	var int8PerToken int64
	if kvType(cfg) != kv.Int8 && (gpuFree <= 0 || GPUInt8KV) {
		int8PerToken = kv.Bytes(info.Layers-info.RingLayers-info.RecurrentLayers, info.KVHeads, info.HeadDim, 1, kv.Int8)
	}
	return experts.PlanInput{
		Shape: s,
		// Sliding-window layers' KV rings and recurrent layers' states are fixed costs beside
		// the weights.
		NonExpertBytes:      info.NonExpertBytes + kv.Bytes(info.RingLayers, info.KVHeads, info.HeadDim, info.RingKeep, kvType(cfg)) + info.RecurrentBytes,
		KVBytesPerToken:     kv.Bytes(info.Layers-info.RingLayers-info.RecurrentLayers, info.KVHeads, info.HeadDim, 1, kvType(cfg)),
		Int8KVBytesPerToken: int8PerToken,
		MinContext:          minCtx,
		ModelContext:        modelCtx,
		ContextGiven:        cfg.MaxContext > 0,

		GPUFreeBytes:     max(gpuFree, 0),
		VRAMReserveBytes: int64(cfg.VRAMReserveMiB) << 20,
		VRAMBudgetBytes:  int64(cfg.VRAMBudgetMiB) << 20,
		ExpertCache:      cfg.ExpertCache,

		HostAvailBytes:   max(hostAvail, 0),
		HostBudgetBytes:  gib(cfg.HostBudgetGiB),
		HostReserveBytes: gib(cfg.HostReserveGiB),

		Tiered:              pinsImplicitly(cfg, gpuFree > 0) || cfg.TieredExperts,
		Resident:            cfg.ResidentExperts,
		ResidentBudgetBytes: gib(cfg.ResidentBudgetGiB),

		HelperSlots: [2]int{cfg.ExpertCacheDevice1, cfg.ExpertCacheDevice2},

		Rank: rank,
	}
}

// pinsImplicitly says whether knobs other than --tiered-experts turn the pinned tier on for
// a run on a GPU without --resident-experts: --pcie-frac needs pinned experts for the GPU to
// read, and a --host-budget-gib is the pinned tier's size, which a run would otherwise ignore
// (the H200 bench with --host-budget-gib 20 and no --tiered-experts read every miss cold).
func pinsImplicitly(cfg Config, onGPU bool) bool {
	return onGPU && !cfg.TieredExperts && !cfg.ResidentExperts && (cfg.pcieShareGiven() || cfg.HostBudgetGiB > 0)
}

// pinsImplicitlyNote says why the pinned tier is on without --tiered-experts ("" when it is not).
func pinsImplicitlyNote(cfg Config, onGPU bool) string {
	switch {
	case !pinsImplicitly(cfg, onGPU):
		return ""
	case cfg.HostBudgetGiB > 0:
		return fmt.Sprintf("--host-budget-gib %g turns on the pinned tier as --tiered-experts does: the experts VRAM cannot hold are pinned in RAM up to it", cfg.HostBudgetGiB)
	default:
		return fmt.Sprintf("--pcie-frac %g needs pinned experts for the GPU to read: the pinned tier is on as with --tiered-experts", cfg.PCIeFrac)
	}
}

// expertShape reads the bytes of one expert's gate, up and down matrices from the stacked
// expert tensors. Quantisation mixes may store some layers' experts in a wider type; the
// shape takes the widest of each, so a VRAM slot holds any expert.
func expertShape(f *gguf.File, info ModelInfo) (experts.Shape, error) {
	s := experts.Shape{Layers: info.Layers, Experts: info.Experts}
	if info.Experts <= 0 || info.Layers <= 0 {
		return s, fmt.Errorf("engine: %s: %d layers x %d experts: not a mixture-of-experts model", f.Path, info.Layers, info.Experts)
	}
	for l := range info.Layers {
		names := model.ExpertTensors(l)
		sizes := [3]*int64{&s.GateBytes, &s.UpBytes, &s.DownBytes}
		for i, name := range names {
			t, ok := f.Tensor(name)
			if !ok {
				return s, fmt.Errorf("engine: %s: tensor %q is missing", f.Path, name)
			}
			if len(t.Ne) != 3 || t.Ne[2] != int64(info.Experts) || t.Size%int64(info.Experts) != 0 {
				return s, fmt.Errorf("engine: %s: tensor %q: shape %v (%d bytes) is not %d stacked experts", f.Path, name, t.Ne, t.Size, info.Experts)
			}
			*sizes[i] = max(*sizes[i], t.Size/int64(info.Experts))
		}
	}
	return s, nil
}

// planHardware is what the planner needs of the machine.
type planHardware struct {
	gpuFree, hostAvail int64
	helperFree         [2]int64 // helper GPUs 1 and 2 (0: none, or not known)
	notes              []string
}

// probePlanHardware finds the main GPU's free VRAM (none with --backend cpu, or when the
// engine could not use it) and the available RAM; what mc gives is not probed.
func probePlanHardware(ctx context.Context, cfg Config, info ModelInfo, mc Machine) (planHardware, error) {
	hw := planHardware{gpuFree: mc.GPUFreeBytes, hostAvail: mc.HostAvailBytes, helperFree: mc.HelperFreeBytes}
	probeRAM := func() {
		if hw.hostAvail <= 0 {
			hw.hostAvail = platform.ProbeMemory(ctx).AvailableBytes
		}
	}
	mode := strings.ToLower(cfg.Backend)
	if mode == "cpu" || (mode != "cuda" && cfg.FloatPath) {
		probeRAM()
		hw.gpuFree = 0
		hw.notes = append(hw.notes, "--backend cpu: no GPU is used")
		return hw, nil
	}
	noGPU := func(why string) error {
		hw.gpuFree = 0
		if mode == "cuda" {
			return fmt.Errorf("engine: --backend cuda: %s", why)
		}
		hw.notes = append(hw.notes, why+": planning for the CPU")
		return nil
	}
	if !gpu.HeadDimSupported(info.HeadDim) {
		probeRAM()
		return hw, noGPU(fmt.Sprintf("the GPU attention kernels do not handle a head size of %d yet", info.HeadDim))
	}
	if why := gpuLacks(info); why != "" {
		probeRAM()
		return hw, noGPU(why)
	}
	if hw.gpuFree > 0 {
		probeRAM()
		hw.notes = append(hw.notes, fmt.Sprintf("GPU: %d MiB free (given, not probed)", hw.gpuFree>>20))
		return hw, nil
	}
	h := platform.Probe(ctx)
	if hw.hostAvail <= 0 {
		hw.hostAvail = h.RAM.AvailableBytes
	}
	if len(h.GPUs.Devices) == 0 {
		why := "no NVIDIA GPU found"
		if h.GPUs.Reason != "" {
			why += " (" + h.GPUs.Reason + ")"
		}
		return hw, noGPU(why)
	}
	g, helpers, err := chooseGPUs(h.GPUs.Devices, cfg.MainGPU)
	if err != nil {
		return hw, err
	}
	hw.gpuFree = g.VRAMFreeBytes
	hw.notes = append(hw.notes, fmt.Sprintf("GPU %d: %s, %d MiB free of %d MiB", g.Index, g.Name, g.VRAMFreeBytes>>20, g.VRAMTotalBytes>>20))
	for i, slots := range [2]int{cfg.ExpertCacheDevice1, cfg.ExpertCacheDevice2} {
		if slots == 0 {
			continue
		}
		if i >= len(helpers) {
			return hw, fmt.Errorf("engine: --expert-cache-device%d %d: there is no helper GPU %d (%d GPUs found, GPU %d is the main one)", i+1, slots, i+1, len(h.GPUs.Devices), g.Index)
		}
		hg := helpers[i]
		hw.helperFree[i] = hg.VRAMFreeBytes
		hw.notes = append(hw.notes, fmt.Sprintf("helper GPU %d: GPU %d, %s, %d MiB free of %d MiB", i+1, hg.Index, hg.Name, hg.VRAMFreeBytes>>20, hg.VRAMTotalBytes>>20))
	}
	return hw, nil
}

// chooseGPUs picks the main GPU (mainGPU, or Auto: the one with the most free VRAM) and
// orders the others as helpers, the most free VRAM first.
func chooseGPUs(devs []platform.GPU, mainGPU int) (main platform.GPU, helpers []platform.GPU, err error) {
	at := -1
	for i, d := range devs {
		if (mainGPU == Auto && (at < 0 || d.VRAMFreeBytes > devs[at].VRAMFreeBytes)) || (mainGPU != Auto && d.Index == mainGPU) {
			at = i
		}
	}
	if at < 0 {
		return main, nil, &ConfigError{Flag: "main-gpu", Msg: fmt.Sprintf("there is no GPU %d (%d found; strata hw lists them)", mainGPU, len(devs))}
	}
	for i, d := range devs {
		if i != at {
			helpers = append(helpers, d)
		}
	}
	slices.SortStableFunc(helpers, func(a, b platform.GPU) int { return cmp.Compare(b.VRAMFreeBytes, a.VRAMFreeBytes) })
	return devs[at], helpers, nil
}
