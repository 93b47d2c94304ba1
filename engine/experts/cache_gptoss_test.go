package experts_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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

// TestCacheGptOssBiases: on a synthetic gpt-oss model, the VRAM cache (its slots on a CPU
// stand-in device, each slot with its expert's bias rows) with the misses on the CPU gives
// the greedy tokens of the whole model on the backend, with swaps moving the biases with the
// experts; what does not carry the biases yet (the streaming ring, PCIe reads of pinned
// experts) refuses at load.
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
	for _, tc := range []tierCase{
		{name: "some slots", vram: 0.4},
		{name: "all slots", vram: 1},
		{name: "some + pinned", vram: 0.3, pin: 0.3, hostPinned: true},
		{name: "adaptive swaps", vram: 0.3, pin: 0.2, adapt: 2, hostPinned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 2, FloatPath: true})}
			host := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
			t.Cleanup(func() { dev.Close(); host.Close() })
			tiers := plan(sh, rank, tc.vram, tc.pin)
			c, net := loadCached(t, f, dev, host, tc, sh, tiers, rank, pinnedArena(t, f, sh, tiers, false), nil)
			for i, p := range prompts {
				if _, _, g := modeltest.Greedy(t, net, p, gen, "f32", nil); !slices.Equal(g, want[i]) {
					t.Errorf("prompt %d: greedy tokens %v, want %v (all on the backend)", i, g, want[i])
				}
			}
			st := c.Snapshot().Stats
			if st.Routed[experts.TierVRAM] == 0 || (tc.vram < 1 && st.Routed[experts.TierVRAM] == st.Routed[experts.TierVRAM]+st.Routed[experts.TierCold]+st.Routed[experts.TierPinned]) {
				t.Errorf("routed %v: want hits and misses", st.Routed)
			}
			if tc.adapt > 0 && st.Swaps == 0 {
				t.Error("adaptive swaps on, yet none happened")
			}
			t.Logf("routed %v, swaps %d", st.Routed, st.Swaps)
		})
	}
	for _, tc := range []struct {
		tierCase
		want string
	}{
		{tierCase{name: "streamed batches", vram: 0.25, streamSlots: 3}, "streaming ring"},
		{tierCase{name: "pinned over pcie", vram: 0.25, pin: 0.25, pcie: 0.5}, "PCIe"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			dev := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 1})}
			t.Cleanup(func() { dev.Close() })
			tiers := plan(sh, rank, tc.vram, tc.pin)
			c, err := experts.NewCache(dev, dev.Backend, experts.CacheConfig{
				Shape: sh, Tier: tiers, Rank: rank, StreamSlots: tc.streamSlots, StreamMinTokens: 2,
				PCIeFrac: tc.pcie, Pinned: pinnedArena(t, f, sh, tiers, false), PinnedMapped: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := model.LoadWith(f, dev, nil, c.Layer); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("load: error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
