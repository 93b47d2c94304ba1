package experts_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/model/modeltest"
)

// TestCacheGptOssOnGPU runs every placement of gptOssTierCases on the real GPU backend (the
// slots' and the streaming ring's bias stacks in VRAM, the pinned experts read over PCIe
// with their biases in VRAM or DMA'd into the streaming ring with their bias rows, the
// fused kernels with the clamped SwiGLU): on the synthetic gpt-oss model each gives the
// greedy tokens of the whole model in VRAM, and on every gptoss-tiny variant the logits
// stay within the README's 8-bit rule. It skips where there is no NVIDIA driver.
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
	for _, tc := range gptOssTierCases() {
		if tc.helper > 0 {
			continue // helper GPUs run on CPU stand-ins (TestCacheGptOssBiases)
		}
		t.Run(tc.name, func(t *testing.T) {
			c, net := loadOnGPU(t, f, sh, rank, tc)
			for i, p := range prompts {
				if _, _, g := modeltest.Greedy(t, net, p, gen, "f16", nil); !slices.Equal(g, want[i]) {
					t.Errorf("prompt %d: greedy tokens %v, want %v (all in VRAM)", i, g, want[i])
				}
			}
			st := c.Snapshot().Stats
			checkServed(t, st, tc)
			checkOverlapped(t, tc, st)
		})
	}

	dir := fixtures.Path(t, "gptoss-tiny")
	fref := modeltest.LoadReference(t, dir)
	for name, v := range fref.Variants {
		f, h := openVariant(t, filepath.Join(dir, v.File))
		sh := experts.Shape{Layers: h.Layers, Experts: h.Experts}
		rank := neutralRank(sh)
		for _, tc := range gptOssTierCases() {
			if tc.helper > 0 {
				continue
			}
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				c, net := loadOnGPU(t, f, sh, rank, tc)
				for _, p := range v.Prompts {
					modeltest.Check8Bit(t, net, dir, p, fref.Tolerances, name)
				}
				st := c.Snapshot().Stats
				checkOverlapped(t, tc, st)
				t.Logf("routed %v, pcie %d, streamed %d (rounds overlapped %d), swaps %d", st.Routed, st.PCIe, st.Streamed, st.Overlapped, st.Swaps)
			})
		}
	}
}

// loadOnGPU loads f through a cache placed as tc on a fresh GPU backend, the pinned experts
// in an arena registered with it, the misses on a CPU pool.
func loadOnGPU(t *testing.T, f *gguf.File, sh experts.Shape, rank []experts.ID, tc tierCase) (*experts.Cache, *model.Model) {
	t.Helper()
	dev, err := gpu.New(gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host := cpu.New(cpu.Options{Threads: 4})
	t.Cleanup(func() { dev.Close(); host.Close() })
	tiers := plan(sh, rank, tc.vram, tc.pin)
	arena := pinnedArena(t, f, sh, tiers, tc.unbuffered)
	if arena != nil && !tc.hostPinned {
		if err := dev.RegisterHost(arena.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return loadCached(t, f, dev, host, tc, sh, tiers, rank, arena, nil)
}
