package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"strata/engine"
	"strata/engine/experts"
)

// planJSON is `strata plan --json`: one object, tiers by name.
type planJSON struct {
	Model           string           `json:"model"`
	Layers          int              `json:"layers"`
	Experts         int              `json:"experts"` // per layer
	ExpertBytes     int64            `json:"expert_bytes"`
	Slots           int              `json:"slots"`
	HelperSlots     []int            `json:"helper_slots,omitempty"` // helper GPUs 1 and 2
	Tiers           map[string]int   `json:"tiers"`                  // experts per tier
	Bytes           map[string]int64 `json:"bytes"`                  // expert bytes per tier
	NonExpertBytes  int64            `json:"non_expert_bytes"`
	HostWeightBytes int64            `json:"host_weight_bytes"` // of non_expert_bytes, in pinned RAM rather than VRAM (the token embeddings)
	KVBytes         int64            `json:"kv_bytes"`
	KVBytesPerToken int64            `json:"kv_bytes_per_token"` // of the layers that grow with the context (--kv f16|int8)
	ActivationBytes int64            `json:"activation_bytes"`
	VRAMLimitBytes  int64            `json:"vram_limit_bytes"`
	VRAMUsedBytes   int64            `json:"vram_used_bytes"`
	Context         int              `json:"context"`
	Notes           []string         `json:"notes"`
	Tier            [][]string       `json:"tier"` // [layer][expert]
}

func runPlan(ctx context.Context, args []string, io IO) error {
	fs := newFlags("plan", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	gpuFree := fs.Int("gpu-free-mib", 0, "plan for a GPU with this much free VRAM instead of probing this machine's (MiB)")
	ramAvail := fs.Float64("ram-avail-gib", 0, "plan for this much available RAM instead of probing it (GiB)")
	var helperFree [2]int
	fs.IntVar(&helperFree[0], "device1-free-mib", 0, "with --gpu-free-mib: helper GPU 1's free VRAM (MiB; 0 = not checked)")
	fs.IntVar(&helperFree[1], "device2-free-mib", 0, "with --gpu-free-mib: helper GPU 2's free VRAM (MiB; 0 = not checked)")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	if *gpuFree < 0 || *ramAvail < 0 || helperFree[0] < 0 || helperFree[1] < 0 {
		return usagef("--gpu-free-mib, --ram-avail-gib and --device1/2-free-mib cannot be negative")
	}
	if *gpuFree == 0 && helperFree != [2]int{} {
		return usagef("--device1/2-free-mib describe another machine's helper GPUs: give its main GPU with --gpu-free-mib too")
	}
	mc := engine.Machine{GPUFreeBytes: int64(*gpuFree) << 20, HostAvailBytes: int64(*ramAvail * (1 << 30)),
		HelperFreeBytes: [2]int64{int64(helperFree[0]) << 20, int64(helperFree[1]) << 20}}
	p, info, err := engine.PlanForMachine(ctx, *modelPath, cfg, mc)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(io.Out).Encode(planToJSON(*modelPath, p))
	}
	name := info.Name
	if name == "" {
		name = *modelPath
	}
	fmt.Fprintf(io.Out, "%s: %s, %s, %d of %d experts per token\n", name, info.Architecture, info.Quantization, info.ExpertsUsed, info.Experts)
	fmt.Fprint(io.Out, p.Summary())
	if p.Context > 0 {
		fmt.Fprintf(io.Out, "KV cache (%s): %d bytes per token\n", cfg.KVType, p.KVBytes/int64(p.Context))
	}
	return nil
}

func planToJSON(model string, p experts.Plan) planJSON {
	s := p.Shape
	out := planJSON{
		Model: model, Layers: s.Layers, Experts: s.Experts, ExpertBytes: s.BlobBytes(), Slots: p.Slots,
		Tiers: map[string]int{}, Bytes: map[string]int64{},
		NonExpertBytes: p.NonExpertBytes, HostWeightBytes: p.HostWeightBytes, KVBytes: p.KVBytes, ActivationBytes: p.ActivationBytes,
		VRAMLimitBytes: p.VRAMLimit, VRAMUsedBytes: p.VRAMUsed(), Context: p.Context,
		Notes: append([]string{}, p.Notes...), Tier: make([][]string, s.Layers),
	}
	if p.HelperSlots != [2]int{} {
		out.HelperSlots = p.HelperSlots[:]
	}
	if p.Context > 0 {
		out.KVBytesPerToken = p.KVBytes / int64(p.Context) // the plan gives every position the same bytes
	}
	for t, n := range p.Counts() {
		out.Tiers[t.String()] = n
	}
	for t, b := range p.Bytes {
		out.Bytes[t.String()] = b
	}
	for l := range s.Layers {
		out.Tier[l] = make([]string, s.Experts)
		for e := range s.Experts {
			out.Tier[l][e] = p.Tier[s.Index(experts.ID{Layer: l, Expert: e})].String()
		}
	}
	return out
}
