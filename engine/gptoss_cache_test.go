package engine

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine/synth"
)

// TestGptOssCacheOnAStandIn: placed as on a GPU (the CPU standing in for it), a gpt-oss
// model with an expert cache of a few slots, the misses on the CPU, gives the greedy tokens
// of the whole model on the CPU backend, with neither a streaming ring nor PCIe reads (they
// do not carry the expert biases); the knobs that ask for them are refused by name.
func TestGptOssCacheOnAStandIn(t *testing.T) {
	spec, err := synth.PresetFor("gpt-oss", "gptoss-small")
	if err != nil {
		t.Fatal(err)
	}
	spec.Pool, spec.Zipf = 256, 1
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 64, false
	whole, err := Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, whole)
	whole.Close()

	m, err := placeOnStandIns(t, path, func(c *Config) { c.TieredExperts, c.ExpertCache = false, 6 }, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := greedy(t, m); !slices.Equal(got, want) {
		t.Errorf("expert cache + CPU misses: tokens %v, all on the backend %v", got, want)
	}
	snap := m.Tiers()
	if c := snap.Cache; c == nil || c.VRAMSlots == 0 || snap.HitsPerTier[TierVRAM] == 0 || snap.HitsPerTier[TierCold]+snap.HitsPerTier[TierPinned] == 0 {
		t.Errorf("want VRAM hits and CPU misses: cache %+v, hits %v", c, snap.HitsPerTier)
	}
	if c := snap.Cache; c != nil && c.Streamed != 0 {
		t.Errorf("%d experts streamed: gpt-oss has no streaming ring", c.Streamed)
	}

	info, err := Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, knob := range []func(*Config){
		func(c *Config) { c.TieredExperts = true },
		func(c *Config) { c.PCIeFrac = 0.5 },
	} {
		c := DefaultConfig()
		knob(&c)
		if why := gpuTiersLackFor(info, c); !strings.Contains(why, "expert biases") {
			t.Errorf("config %+v: refusal %q does not name the expert biases", c, why)
		}
	}
	if why := gpuTiersLackFor(info, Config{ExpertCache: 6, AdaptEvery: 4}); why != "" {
		t.Errorf("expert cache refused: %s", why)
	}
}
