package engine

import (
	"fmt"
	"log/slog"
	"strings"

	"strata/engine/compute"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
)

// regionReserver is a device that holds the model's weights and the expert cache's slot
// stacks in one allocation, which its Place and NewSlots carve (the GPU backend): one by
// one, the driver rounds each up to its 2 MiB granularity, which no plan counts (q30b's at
// --vram-budget-mib 8913 lost 261 MiB that way).
type regionReserver interface {
	ReserveRegion(bytes int64) error
}

// isExpertTensor says whether the tensor is an expert stack or its bias stack: what the
// expert cache places in tiered mode, and what describe counts as expert bytes.
func isExpertTensor(name string) bool { return strings.Contains(name, "_exps.") }

// placedTensorBytes is what the GPU's Place takes for tensor t as the model loader places
// it: an expert bias stack [cols, experts] as one row per expert.
func placedTensorBytes(t *gguf.TensorInfo) int64 {
	rows, cols := 1, int(t.Ne[0])
	for i, n := range t.Ne[1:] {
		if i == 0 && !strings.HasSuffix(t.Name, "_exps.bias") {
			rows = int(n)
			continue
		}
		cols *= int(n)
	}
	return gpu.PlacedBytes(t.Type, rows, cols, t.Size)
}

// weightsOnDevice is what the model loader's Place calls take on the GPU, each rounded up
// to compute.SlotAlign: every tensor but those inHost names and, unless withExperts, the
// expert stacks (the cache's); the token embeddings twice where the output reuses them.
func weightsOnDevice(f *gguf.File, withExperts bool, inHost func(name string) bool) int64 {
	var total int64
	_, hasOutput := f.Tensor("output.weight")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if (!withExperts && isExpertTensor(t.Name)) || inHost(t.Name) {
			continue
		}
		n := compute.SlotAligned(placedTensorBytes(t))
		if t.Name == "token_embd.weight" && !hasOutput {
			n *= 2 // tied: placed again as the output
		}
		total += n
	}
	return total
}

// expertSpecs are every layer's expert stacks and bias stacks as the model loader hands
// them to the cache (Data left out).
func expertSpecs(f *gguf.File, layers int) ([]experts.LayerSpecs, error) {
	out := make([]experts.LayerSpecs, layers)
	for l := range layers {
		for m, name := range model.ExpertTensors(l) {
			t, ok := f.Tensor(name)
			if !ok || len(t.Ne) != 3 {
				return nil, fmt.Errorf("engine: %s: tensor %q is missing or not a stack of experts", f.Path, name)
			}
			out[l].Mats[m] = compute.WeightSpec{Name: name, Type: t.Type, Rows: int(t.Ne[1]), Cols: int(t.Ne[0]), Experts: int(t.Ne[2])}
			bias := strings.TrimSuffix(name, ".weight") + ".bias"
			if b, ok := f.Tensor(bias); ok && len(b.Ne) == 2 {
				out[l].Bias[m] = compute.WeightSpec{Name: bias, Type: b.Type, Rows: 1, Cols: int(b.Ne[0]), Experts: int(b.Ne[1])}
			}
		}
	}
	return out, nil
}

// reserveRegion asks a device that can for one allocation of everything Place and NewSlots
// will take next: the weights (and, with a cache, its slot stacks and rings). A refusal
// (no room for one piece) leaves them to be allocated one by one.
func (p *placement) reserveRegion(f *gguf.File, dev any, cache *experts.Cache, layers int) error {
	r, ok := dev.(regionReserver)
	if !ok {
		return nil
	}
	inHost := func(name string) bool { return name == "token_embd.weight" && p.embdInHost > 0 }
	n := weightsOnDevice(f, cache == nil, inHost)
	if cache != nil {
		specs, err := expertSpecs(f, layers)
		if err != nil {
			return err
		}
		stacks, err := cache.DeviceBytes(specs, gpu.PlacedBytes)
		if err != nil {
			return err
		}
		n += stacks
	}
	if err := r.ReserveRegion(n); err != nil {
		slog.Info("engine: weights and slot stacks allocated one by one", "reason", err)
	}
	return nil
}
