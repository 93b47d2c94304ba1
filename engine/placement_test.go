package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/synth"
	"strata/platform"
)

// TestExpertCacheKnobOnTheCPU: asking for VRAM slots on a CPU-only run is a clear error,
// never a silently ignored flag.
func TestExpertCacheKnobOnTheCPU(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.ExpertCache = "cpu", 4
	_, err := engine.Open(context.Background(), fixtures.LoadReference(t, "qwen3moe-tiny").Smallest(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "--expert-cache 4") {
		t.Fatalf("got %v, want an error naming --expert-cache 4", err)
	}
}

// TestTieredOpenOnGPU opens the fixture model with the tier knobs through the public API and
// expects the reference continuation and a tier map that shows the split. It skips where
// there is no NVIDIA driver, and for variants whose head size the GPU does not handle.
func TestTieredOpenOnGPU(t *testing.T) {
	skipWithoutGPU(t)
	_, files, prompts := qwenVariants(t)
	for name, path := range files {
		info, err := engine.Inspect(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if !gpu.HeadDimSupported(info.HeadDim) {
			continue
		}
		for _, knobs := range []struct {
			name string
			set  func(*engine.Config)
		}{
			{"cache 0", func(c *engine.Config) { c.ExpertCache = 0 }},
			{"cache 10", func(c *engine.Config) { c.ExpertCache = 10 }},
			{"tiered + pcie", func(c *engine.Config) { c.ExpertCache, c.TieredExperts, c.PCIeFrac = 8, true, 0.5 }},
			{"pcie alone", func(c *engine.Config) { c.ExpertCache, c.PCIeFrac = 8, 1 }},
			{"tiered, pcie auto (the default)", func(c *engine.Config) { c.ExpertCache, c.TieredExperts = 8, true }},
			{"adaptive", func(c *engine.Config) { c.ExpertCache, c.AdaptEvery = 8, 4 }},
		} {
			t.Run(name+"/"+knobs.name, func(t *testing.T) {
				cfg := engine.DefaultConfig()
				cfg.Backend, cfg.MaxContext, cfg.LearnProfile = "cuda", 128, false
				knobs.set(&cfg)
				m, err := engine.Open(context.Background(), path, cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				expectContinuations(t, m, prompts[name], name+"/"+knobs.name)
				snap := m.Tiers()
				if snap.Cache == nil {
					t.Fatal("tier knobs set, yet the tier map shows no expert cache")
				}
				var n int
				for _, row := range snap.Tier {
					for _, tier := range row {
						if tier == engine.TierVRAM {
							n++
						}
					}
				}
				if n != snap.Cache.VRAMSlots || n != cfg.ExpertCache {
					t.Errorf("tier map shows %d experts in VRAM, the cache %d slots, asked for %d", n, snap.Cache.VRAMSlots, cfg.ExpertCache)
				}
				if cfg.PCIeFrac > 0 && snap.Cache.PinnedSlots == 0 {
					t.Error("--pcie-frac set, yet no expert is pinned for the GPU to read")
				}
				// auto tunes a share only where there is a pinned tier for the GPU to read
				pinned := snap.Cache.PinnedSlots > 0
				if cfg.PCIeFrac == engine.Auto && pinned && (snap.Cache.PCIeReads == 0 || snap.Cache.PCIeShare <= 0) {
					t.Errorf("--pcie-frac auto: %d PCIe reads, share now %g", snap.Cache.PCIeReads, snap.Cache.PCIeShare)
				}
				if cfg.PCIeFrac == engine.Auto && !pinned && (snap.Cache.PCIeReads != 0 || snap.Cache.PCIeShare != 0) {
					t.Errorf("--pcie-frac auto without a pinned tier: %d PCIe reads, share now %g", snap.Cache.PCIeReads, snap.Cache.PCIeShare)
				}
				t.Logf("hits per tier %v, cache %+v", snap.HitsPerTier, *snap.Cache)
			})
		}
	}
}

// TestResidentOnTheCPU: without a GPU, --resident-experts reads the experts into the RAM
// arena (all of them, or as many as --resident-budget-gib allows, the rest staying in the
// file) and the CPU computes from it: the reference continuation, and a tier map that says so.
// The arena is filled before the model file is mapped (where the filesystem takes unbuffered
// reads), and filling it through the mapping instead gives the same arena.
func TestResidentOnTheCPU(t *testing.T) {
	_, files, prompts := qwenVariants(t)
	for name, path := range files {
		info, err := engine.Inspect(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		unbuffered := platform.UnbufferedSupported(path)
		half := float64(info.ExpertBytes) / 2 / (1 << 30) // room for half the experts
		for _, budget := range []float64{0, half} {
			cfg := engine.DefaultConfig()
			cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.ResidentExperts, cfg.ResidentBudgetGiB = "cpu", 2, 128, true, budget
			cfg.Verify, cfg.LearnProfile = true, false
			var phases []string
			m, err := engine.Open(context.Background(), path, cfg, func(p engine.Progress) {
				if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
					phases = append(phases, p.Phase)
				}
			})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			expectContinuations(t, m, prompts[name], fmt.Sprintf("%s budget %g", name, budget))
			snap := m.Tiers()
			if snap.Cache == nil || snap.Cache.ArenaBytes == 0 || len(snap.Cache.Verify) == 0 {
				t.Fatalf("%s: resident mode shows no RAM arena or checksum: %+v", name, snap.Cache)
			}
			if unbuffered != snap.Cache.ArenaUnmapped {
				t.Errorf("%s: unbuffered reads work here: %v; arena filled before the file was mapped: %v (notes %q)", name, unbuffered, snap.Cache.ArenaUnmapped, snap.Cache.Notes)
			}
			// The file is mapped after the RAM copy, before the weights are placed.
			if want := []string{"mapping", "ram-copy", "mapping", "weights"}; unbuffered && (len(phases) < len(want) || !slices.Equal(phases[:len(want)], want)) {
				t.Errorf("%s: progress phases %v, want them to start %v", name, phases, want)
			}
			pinned, cold := 0, 0
			for _, row := range snap.Tier {
				for _, tier := range row {
					switch tier {
					case engine.TierPinned:
						pinned++
					case engine.TierCold:
						cold++
					}
				}
			}
			if pinned == 0 || (budget == 0) != (cold == 0) {
				t.Errorf("%s budget %g: %d experts pinned, %d cold", name, budget, pinned, cold)
			}
			if snap.HitsPerTier[engine.TierPinned] == 0 {
				t.Errorf("%s: no routed expert was served from the arena", name)
			}
			m.Close()
			if budget == 0 {
				// The start-up comparison's other path, through the mapping: the same arena.
				t.Setenv("STRATA_FILL_MAPPED", "1")
				m, err := engine.Open(context.Background(), path, cfg, nil)
				if err != nil {
					t.Fatalf("%s through the mapping: %v", name, err)
				}
				mapped := m.Tiers().Cache
				if !slices.Equal(mapped.Verify, snap.Cache.Verify) || mapped.ArenaUnmapped || !strings.Contains(strings.Join(mapped.Notes, "\n"), "through the mapping") {
					t.Errorf("%s: filled through the mapping: verify %q notes %q; before mapping: verify %q", name, mapped.Verify, mapped.Notes, snap.Cache.Verify)
				}
				expectContinuations(t, m, prompts[name], name+" through the mapping")
				m.Close()
				t.Setenv("STRATA_FILL_MAPPED", "")
			}
		}
	}
}

// expectContinuations generates every prompt's greedy continuation and compares it with the
// reference's.
func expectContinuations(t *testing.T, m *engine.Model, prompts []refPrompt, what string) {
	t.Helper()
	s := m.NewSession(engine.SessionOptions{})
	for _, p := range prompts {
		res, err := s.Generate(context.Background(), p.Tokens, engine.Sampling{MaxTokens: len(p.Generated), IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", what, p.Name, err)
		}
		if !slices.Equal(res.Tokens, p.Generated) {
			t.Errorf("%s %s: tokens %v, want %v", what, p.Name, res.Tokens, p.Generated)
		}
	}
}

// TestResidentWithPack: with an experts.bin next to the model the arena comes from it, and
// a stale one (written for a model with the same tensors but other weights) is still caught
// by comparing bytes with the model. That check reads both files without mapping them, so
// the arena is filled before either is mapped wherever unbuffered reads work, from
// experts.bin as from the model.
func TestResidentWithPack(t *testing.T) {
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Layers, spec.Experts, spec.Pool = 2, 8, 256
	dir := t.TempDir()
	models := map[string]string{}
	for name, seed := range map[string]uint64{"a": 1, "b": 2} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		spec.Seed = seed
		models[name] = filepath.Join(dir, name, "model.gguf")
		if err := synth.Write(context.Background(), models[name], spec, nil); err != nil {
			t.Fatal(err)
		}
	}
	f, err := gguf.Open(models["a"])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b"} { // b gets a's pack: same tensor index, other bytes
		if _, err := experts.Pack(context.Background(), f, filepath.Join(dir, d), nil); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	sums := map[string]string{}
	for name, path := range models {
		for _, pack := range []bool{true, false} {
			if !pack {
				if err := os.Remove(filepath.Join(dir, name, experts.PackFile)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := engine.DefaultConfig()
			cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.ResidentExperts = "cpu", 2, 64, true
			cfg.Verify, cfg.LearnProfile = true, false
			m, err := engine.Open(context.Background(), path, cfg, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			c := m.Tiers().Cache
			if _, err := m.NewSession(engine.SessionOptions{}).Generate(context.Background(), []int{1, 2, 3}, engine.Sampling{MaxTokens: 2, IgnoreEOS: true}, nil); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			m.Close()
			if c == nil || len(c.Verify) == 0 {
				t.Fatalf("%s: no arena checksum: %+v", name, c)
			}
			if want := pack && name == "a"; c.ArenaFromPack != want {
				t.Errorf("%s (experts.bin there: %v): arena from experts.bin %v, want %v", name, pack, c.ArenaFromPack, want)
			}
			if want := platform.UnbufferedSupported(path); c.ArenaUnmapped != want {
				t.Errorf("%s (experts.bin there: %v): unbuffered reads work here: %v; arena filled before mapping: %v (notes %q)", name, pack, want, c.ArenaUnmapped, c.Notes)
			}
			key := fmt.Sprintf("%s/%v", name, pack)
			sums[key] = strings.Join(c.Verify, " ")
		}
	}
	if sums["a/true"] != sums["a/false"] || sums["b/true"] != sums["b/false"] || sums["a/false"] == sums["b/false"] {
		t.Errorf("arena checksums %v: want one per model, whether or not experts.bin is used", sums)
	}
}
