package experts_test

import (
	"errors"
	"slices"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/model"
	"strata/engine/model/modeltest"
)

// TestCacheGptOssOnGPU runs TestCacheGptOssBiases's placements on the real GPU backend (the
// slots' bias stacks in VRAM, the fused kernels with the clamped SwiGLU): each gives the
// greedy tokens of the whole model in VRAM. It skips where there is no NVIDIA driver.
func TestCacheGptOssOnGPU(t *testing.T) {
	probe, err := gpu.New(gpu.Options{})
	if errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probe.Close() })
	f, h := gptOssSynth(t)
	prompts := [][]int{{5, 77, 300, 12, 9, 400, 41, 8, 100, 3, 250, 19}, {260}}
	const gen = 12
	ref, err := model.Load(f, probe, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]int
	for _, p := range prompts {
		_, _, g := modeltest.Greedy(t, ref, p, gen, "f16", nil)
		want = append(want, g)
	}
	sh := experts.Shape{Layers: h.Layers, Experts: h.Experts}
	rank := neutralRank(sh)
	for _, tc := range []tierCase{
		{name: "some slots", vram: 0.4},
		{name: "all slots", vram: 1},
		{name: "some + pinned", vram: 0.3, pin: 0.3, hostPinned: true},
		{name: "adaptive swaps", vram: 0.3, pin: 0.2, adapt: 2, hostPinned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := gpu.New(gpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			host := cpu.New(cpu.Options{Threads: 4})
			t.Cleanup(func() { dev.Close(); host.Close() })
			tiers := plan(sh, rank, tc.vram, tc.pin)
			c, net := loadCached(t, f, dev, host, tc, sh, tiers, rank, pinnedArena(t, f, sh, tiers, false), nil)
			for i, p := range prompts {
				if _, _, g := modeltest.Greedy(t, net, p, gen, "f16", nil); !slices.Equal(g, want[i]) {
					t.Errorf("prompt %d: greedy tokens %v, want %v (all in VRAM)", i, g, want[i])
				}
			}
			st := c.Snapshot().Stats
			if tc.adapt > 0 && st.Swaps == 0 {
				t.Error("adaptive swaps on, yet none happened")
			}
			t.Logf("routed %v, swaps %d", st.Routed, st.Swaps)
		})
	}
}
