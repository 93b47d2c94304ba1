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
	"strata/engine/model/modeltest"
)

// TestCacheOnGPU runs every placement of TestCacheMatchesTransformers on the real GPU
// backend (VRAM slots, pinned host slots read over PCIe, the staged and direct uploads),
// against transformers' logits under the fixture's 8-bit tolerance, with the greedy
// continuation identical. It skips where there is no NVIDIA driver.
func TestCacheOnGPU(t *testing.T) {
	dir := fixtures.Path(t, "qwen3moe-tiny")
	probe, err := gpu.New(gpu.Options{})
	if errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	ref := modeltest.LoadReference(t, dir)
	ran := 0
	for name, v := range ref.Variants {
		f, h := openVariant(t, filepath.Join(dir, v.File))
		if !gpu.HeadDimSupported(h.HeadDim) {
			continue
		}
		ran++
		for _, tc := range tierCases() {
			if tc.helper > 0 {
				continue // helper GPUs run on CPU stand-ins (TestCacheMatchesTransformers); a second context on this card is not wired yet
			}
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				dev, err := gpu.New(gpu.Options{})
				if err != nil {
					t.Fatal(err)
				}
				host := cpu.New(cpu.Options{Threads: 4})
				t.Cleanup(func() { dev.Close(); host.Close() })
				sh := experts.Shape{Layers: h.Layers, Experts: h.Experts}
				rank := neutralRank(sh)
				tiers := plan(sh, rank, tc.vram, tc.pin)
				arena := pinnedArena(t, f, sh, tiers, tc.unbuffered)
				if arena != nil {
					if err := dev.RegisterHost(arena.Bytes()); err != nil {
						t.Fatal(err)
					}
				}
				c, net := loadCached(t, f, dev, host, tc, sh, tiers, rank, arena, nil)
				for _, p := range v.Prompts {
					pl, gl, gen := modeltest.Greedy(t, net, p.Tokens, len(p.Generated), "f16", nil)
					want := append(modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)), modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File))...)
					maxAbs, rel := modeltest.Compare(append(pl, gl...), want)
					t.Logf("%s: max |Δlogit| %.3g, RMS/std %.4f", p.Name, maxAbs, rel)
					if rule := ref.Tolerances.Int8; rel > rule.RMSOverStd || maxAbs > rule.MaxAbsLogit {
						t.Errorf("%s: logits off: max %.3g, RMS/std %.4f", p.Name, maxAbs, rel)
					}
					if !slices.Equal(gen, p.Generated) {
						t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
					}
				}
				st := c.Snapshot().Stats
				checkOverlapped(t, tc, st)
				t.Logf("routed %v, pcie %d, streamed %d (rounds overlapped %d), swaps %d", st.Routed, st.PCIe, st.Streamed, st.Overlapped, st.Swaps)
			})
		}
	}
	if ran == 0 {
		t.Skipf("fixtures: no qwen3moe-tiny variant has a head size the GPU kernels take (%v), skipping", ref.Names())
	}
}
