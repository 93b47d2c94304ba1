package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/synth"
)

// TestHostBudgetPinsHybridExperts: planned for a GPU whose VRAM budget holds only some
// experts, a --host-budget-gib without --tiered-experts pins as many of the rest as the
// budget holds (the H200 bench of qwen35-35b-a3b with --host-budget-gib 20 built no arena
// and read every miss cold); without a host budget they stay cold, and with --backend cpu the
// budget pins nothing. The shared experts, the conv/ssm weights and the recurrent state are
// counted beside the non-expert weights, never as routed experts.
func TestHostBudgetPinsHybridExperts(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, arch := range []string{"qwen35moe", "qwen3next"} {
		spec, err := synth.PresetFor(arch, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		spec.Pool = 64
		path := filepath.Join(t.TempDir(), arch+".gguf")
		if err := synth.Write(context.Background(), path, spec, nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var routed, shared, ssm, all int64
		for _, ti := range f.Tensors {
			all += ti.Size
			switch {
			case strings.Contains(ti.Name, "_exps."):
				routed += ti.Size
			case strings.Contains(ti.Name, "_shexp."):
				shared += ti.Size
			case strings.Contains(ti.Name, ".ssm_"):
				ssm += ti.Size
			}
		}
		f.Close()
		if shared == 0 || ssm == 0 {
			t.Fatalf("%s: the synth model has %d bytes of shared experts and %d of ssm tensors", arch, shared, ssm)
		}
		count := spec.Layers * spec.Experts
		blob := routed / int64(count)

		const slots, pin = 10, 7
		cfg := DefaultConfig()
		cfg.Backend, cfg.ExpertCache, cfg.MaxContext = "cuda", slots, 256
		cfg.HostBudgetGiB = (float64(pin) + 0.5) * float64(blob) / (1 << 30)
		mc := Machine{GPUFreeBytes: 4 << 30, HostAvailBytes: 64 << 30}
		p, info, err := PlanForMachine(context.Background(), path, cfg, mc)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		notes := strings.Join(p.Notes, "\n")
		c := p.Counts()
		if p.Slots != slots || c[experts.TierVRAM] != slots || c[experts.TierPinned] != pin || c[experts.TierCold] != count-slots-pin {
			t.Errorf("%s: %d slots, tiers %v; want %d VRAM, %d pinned, %d cold\n%s", arch, p.Slots, c, slots, pin, count-slots-pin, notes)
		}
		if p.Bytes[experts.TierPinned] != pin*blob || p.Shape.BlobBytes() != blob {
			t.Errorf("%s: pinned bytes %d, one expert %d; want %d and %d (the routed experts only)", arch, p.Bytes[experts.TierPinned], p.Shape.BlobBytes(), pin*blob, blob)
		}
		if !strings.Contains(notes, "--host-budget-gib") || !strings.Contains(notes, "pinned tier") {
			t.Errorf("%s: the notes do not say why experts are pinned without --tiered-experts:\n%s", arch, notes)
		}
		if info.NonExpertBytes != all-routed || p.NonExpertBytes < info.NonExpertBytes+info.RecurrentBytes || info.RecurrentBytes <= 0 {
			t.Errorf("%s: non-expert bytes %d (file %d less routed %d), plan %d, recurrent state %d",
				arch, info.NonExpertBytes, all, routed, p.NonExpertBytes, info.RecurrentBytes)
		}

		// No host budget: the rest stays cold, as before.
		noBudget := cfg
		noBudget.HostBudgetGiB = 0
		if p, _, err := PlanForMachine(context.Background(), path, noBudget, mc); err != nil || p.Counts()[experts.TierPinned] != 0 || p.Counts()[experts.TierCold] != count-slots {
			t.Errorf("%s: without a host budget: %v, tiers %v", arch, err, p.Counts())
		}
		// --tiered-experts with the same budget pins the same experts.
		tiered := cfg
		tiered.TieredExperts = true
		if pt, _, err := PlanForMachine(context.Background(), path, tiered, mc); err != nil || fmt.Sprint(pt.Tier) != fmt.Sprint(p.Tier) {
			t.Errorf("%s: --tiered-experts plans other tiers than --host-budget-gib alone: %v, %v", arch, err, pt.Counts())
		}
		// The CPU plan has no pinned tier to turn on.
		onCPU := cfg
		onCPU.Backend, onCPU.ExpertCache = "cpu", Auto
		if p, _, err := PlanForMachine(context.Background(), path, onCPU, mc); err != nil || p.Counts()[experts.TierCPU] != count {
			t.Errorf("%s: --backend cpu with a host budget: %v, tiers %v", arch, err, p.Counts())
		}
	}
}

// TestHostBudgetPinsOnAStandInGPU: placed as Open places a model on a GPU (the CPU standing
// in for it), a tiny qwen3next with 8 VRAM slots and --host-budget-gib but no
// --tiered-experts pins every other expert (the cache's pinned slots are what bench --json
// reports as pinned_slots; they were 0 on the H200) and gives the tokens of the
// --tiered-experts start; without a host budget nothing is pinned.
func TestHostBudgetPinsOnAStandInGPU(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	spec, err := synth.PresetFor("qwen3next", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Pool = 64
	path := filepath.Join(t.TempDir(), "qwen3next.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	count := spec.Layers * spec.Experts
	var want []int
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		pinned int
	}{
		{"--tiered-experts", func(*Config) {}, count - 8},
		{"--host-budget-gib alone", func(c *Config) { c.TieredExperts = false }, count - 8},
		{"neither", func(c *Config) { c.TieredExperts, c.HostBudgetGiB = false, 0 }, 0},
	} {
		m, err := placeOnStandIns(t, path, tc.edit, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := greedy(t, m)
		c := m.Tiers().Cache
		m.Close()
		if c == nil || c.PinnedSlots != tc.pinned {
			t.Errorf("%s: cache %+v, want %d pinned slots", tc.name, c, tc.pinned)
		}
		if want == nil {
			want = got
		} else if !slices.Equal(got, want) {
			t.Errorf("%s: tokens %v, with --tiered-experts %v", tc.name, got, want)
		}
	}
}
