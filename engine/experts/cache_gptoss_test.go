package experts_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/model/modeltest"
	"strata/engine/synth"
)

// gptOssSynth writes the small synthetic gpt-oss model (expert biases, clamped SwiGLU).
func gptOssSynth(t *testing.T) (*gguf.File, model.Hparams) {
	t.Helper()
	spec, err := synth.PresetFor("gpt-oss", "gptoss-small")
	if err != nil {
		t.Fatal(err)
	}
	spec.Pool, spec.Zipf = 256, 1
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	return openVariant(t, path)
}

// gptOssTierCases are the placements a gpt-oss model is run in: VRAM slots with CPU misses,
// pinned slots (on the CPU or read by the device over PCIe), batches streamed through the
// ring (from pinned slots and the file, or read around the page cache), helper GPUs, and
// swaps, each expert's bias rows following it.
func gptOssTierCases() []tierCase {
	return append([]tierCase{
		{name: "some slots", vram: 0.4},
		{name: "all slots", vram: 1},
		{name: "some + pinned", vram: 0.3, pin: 0.3, hostPinned: true},
		{name: "adaptive swaps", vram: 0.3, pin: 0.2, adapt: 2, hostPinned: true},
		{name: "resident: all pinned", pin: 1, hostPinned: true},
		{name: "some + pinned + pcie", vram: 0.3, pin: 0.4, pcie: 0.5},
		{name: "all pinned over pcie", pin: 1, pcie: 1},
		{name: "pcie + adaptive swaps", vram: 0.3, pin: 0.4, pcie: 0.5, adapt: 2},
		{name: "streamed batches", vram: 0.25, pin: 0.25, streamSlots: 3},
		{name: "streamed, ring holds all", vram: 0.5, streamSlots: 64},
		{name: "streamed, cold read unbuffered", vram: 0.25, pin: 0.25, streamSlots: 3, coldDirect: true},
		{name: "streamed + pcie + adaptive swaps", vram: 0.25, pin: 0.35, pcie: 0.5, streamSlots: 5, adapt: 2},
		{name: "helpers", vram: 0.3, helper: 0.4},
		{name: "helpers + pinned + adaptive swaps", vram: 0.2, pin: 0.2, helper: 0.3, adapt: 2},
		{name: "all on helpers, streamed batches", helper: 1, streamSlots: 3},
	}, lapCases()...)
}

// TestCacheGptOssBiases: on a synthetic gpt-oss model, every placement of gptOssTierCases
// on a CPU stand-in device and CPU stand-in helpers (each VRAM, pinned, helper and ring slot
// with its expert's bias rows) gives the greedy tokens of the whole model on the backend.
func TestCacheGptOssBiases(t *testing.T) {
	f, h := gptOssSynth(t)
	prompts := [][]int{{5, 77, 300, 12, 9, 400, 41, 8, 100, 3, 250, 19}, {260}}
	const gen = 12
	whole := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
	t.Cleanup(func() { whole.Close() })
	ref, err := model.Load(f, whole, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]int
	for _, p := range prompts {
		_, _, g := modeltest.Greedy(t, ref, p, gen, "f32", nil)
		want = append(want, g)
	}
	sh := experts.Shape{Layers: h.Layers, Experts: h.Experts}
	rank := neutralRank(sh)
	for _, tc := range gptOssTierCases() {
		t.Run(tc.name, func(t *testing.T) {
			hd := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 2, FloatPath: true})}
			host := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
			t.Cleanup(func() { hd.Close(); host.Close() })
			tiers := plan(sh, rank, tc.vram, tc.pin)
			helperOf := withHelpers(sh, rank, tiers, tc)
			arena := pinnedArena(t, f, sh, tiers, false)
			dev, lap := deviceFor(t, hd, tc, arena)
			c, net := loadCached(t, f, dev, host, tc, sh, tiers, rank, arena, helperOf)
			for i, p := range prompts {
				if _, _, g := modeltest.Greedy(t, net, p, gen, "f32", nil); !slices.Equal(g, want[i]) {
					t.Errorf("prompt %d: greedy tokens %v, want %v (all on the backend)", i, g, want[i])
				}
			}
			st := c.Snapshot().Stats
			checkServed(t, st, tc)
			checkLap(t, tc, lap, st)
		})
	}
}

// checkServed fails unless the tiers tc asks for served routed pairs: VRAM hits (with VRAM
// slots), misses (unless all are in VRAM), PCIe reads, streamed experts and swaps when
// asked for.
func checkServed(t *testing.T, st experts.CacheStats, tc tierCase) {
	t.Helper()
	if tc.vram > 0 && st.Routed[experts.TierVRAM] == 0 {
		t.Errorf("routed %v: want VRAM hits", st.Routed)
	}
	if tc.vram < 1 && st.Routed[experts.TierCold]+st.Routed[experts.TierPinned]+st.Routed[experts.TierHelper] == 0 {
		t.Errorf("routed %v: want misses", st.Routed)
	}
	if tc.helper > 0 && st.Routed[experts.TierHelper] == 0 {
		t.Errorf("routed %v: want helper hits", st.Routed)
	}
	if tc.pcie > 0 && st.PCIe == 0 {
		t.Error("--pcie-frac set, yet no pinned expert was read over PCIe")
	}
	if tc.streamSlots > 0 && tc.vram+tc.helper < 1 && st.Streamed == 0 {
		t.Error("a streaming ring, yet no expert streamed")
	}
	if tc.coldDirect && st.ColdReads == 0 {
		t.Error("unbuffered cold reads on, yet none happened")
	}
	if tc.adapt > 0 && st.Swaps == 0 {
		t.Error("adaptive swaps on, yet none happened")
	}
	t.Logf("routed %v, pcie %d, streamed %d (cold reads %d), swaps %d", st.Routed, st.PCIe, st.Streamed, st.ColdReads, st.Swaps)
}
