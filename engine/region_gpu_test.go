package engine

import (
	"context"
	"errors"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
)

// TestRegionOnGPU opens synthetic qwen3moe and gpt-oss models tiered on the GPU (half their
// experts in VRAM) and checks the region the backend carved the weights and slot stacks from: every
// Place and NewSlots fitted it (no allocation of their own), it is full to the byte, and it
// is the plan's weights and expert slots (the file's non-expert bytes less the embeddings
// in host memory, each VRAM slot's and ring slot's blob, gpt-oss's bias rows) up to the
// SlotAlign rounding of each allocation. After a prompt the backend's VRAM (region, KV
// cache, scratch, activations) stays within the budget. It skips without a driver.
func TestRegionOnGPU(t *testing.T) {
	probe, err := gpu.New(gpu.Options{})
	if errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	for _, arch := range []string{"qwen3moe", "gpt-oss"} {
		t.Run(arch, func(t *testing.T) {
			path := writeTinyPreset(t, arch)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			info, err := describe(f)
			if err != nil {
				t.Fatal(err)
			}
			// One expert's matrices and bias rows (alike in every layer of a synth).
			var blob, bias int64
			for _, ti := range f.Tensors {
				switch {
				case !isExpertTensor(ti.Name):
				case len(ti.Ne) == 2:
					bias += ti.Size / int64(info.Experts*info.Layers)
				default:
					blob += ti.Size / int64(info.Experts*info.Layers)
				}
			}
			tensors := len(f.Tensors)
			f.Close()
			cfg := DefaultConfig()
			cfg.Backend, cfg.TieredExperts, cfg.MaxContext, cfg.LearnProfile = "cuda", true, 256, false
			// Half the experts in VRAM, under a budget the backend's checks keep to.
			cfg.ExpertCache, cfg.VRAMBudgetMiB = info.Layers*info.Experts/2, 1024
			m, err := Open(context.Background(), path, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			g := m.place.backend.(*gpu.Backend)
			size, used, misses := g.RegionStats()
			st := m.place.cache.Snapshot().Stats
			if size == 0 || used != size || misses != 0 {
				t.Fatalf("region of %d bytes, %d carved, %d allocations past it", size, used, misses)
			}
			if st.DeviceSlots == 0 || st.DeviceSlots == info.Layers*info.Experts {
				t.Fatalf("%d of %d experts in VRAM: not a tiered start", st.DeviceSlots, info.Layers*info.Experts)
			}
			ring := int64(streamRingSlots(experts.Shape{Experts: info.Experts}))
			want := info.NonExpertBytes - m.place.embdInHost + (int64(st.DeviceSlots)+ring)*(blob+bias)
			// The device may also hold the bias rows of the pinned experts it reads.
			pinnedBias := int64(st.PinnedSlots) * bias
			slack := int64(compute.SlotAlign) * int64(tensors+8*info.Layers+8)
			if size < want-slack || size > want+pinnedBias+slack {
				t.Errorf("region %d bytes, the plan's weights and slots %d (+ %d of pinned bias rows, ± %d of rounding)", size, want, pinnedBias, slack)
			}
			s := m.NewSession(SessionOptions{})
			if _, err := s.Generate(context.Background(), []int{1, 2, 3, 4, 5, 6, 7, 8}, Sampling{MaxTokens: 4, IgnoreEOS: true}, nil); err != nil {
				t.Fatal(err)
			}
			if u := g.UsedBytes(); u > int64(cfg.VRAMBudgetMiB)<<20 || u < size {
				t.Errorf("the backend uses %d bytes, the region %d, the budget %d", u, size, int64(cfg.VRAMBudgetMiB)<<20)
			}
			t.Logf("region %d bytes (plan's weights and slots %d), backend %d bytes, %d VRAM slots", size, want, g.UsedBytes(), st.DeviceSlots)
		})
	}
}
