package engine

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/synth"
)

// TestGptOssTiersOnAStandIn: placed as on a GPU (the CPU standing in for it), a gpt-oss
// model gives the greedy tokens of the whole model on the CPU backend in every tier mode
// Open builds for it: the expert cache with the misses on the CPU, the tiered mode (pinned
// and cold experts, the prompt streamed through the ring), the tiered mode with half the
// pinned misses read over PCIe, and the resident mode; each expert's biases travel with it.
// The prompt is long enough to stream (streamMinTokens). GPULacks no longer sends gpt-oss to
// the CPU.
func TestGptOssTiersOnAStandIn(t *testing.T) {
	spec, err := synth.PresetFor("gpt-oss", "gptoss-small")
	if err != nil {
		t.Fatal(err)
	}
	spec.Pool, spec.Zipf = 256, 1
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, streamMinTokens+8)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % 500
	}
	run := func(m *Model) []int {
		t.Helper()
		res, err := m.NewSession(SessionOptions{}).Generate(context.Background(), prompt, Sampling{MaxTokens: 8, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	cfg := DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 64, false
	whole, err := Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := run(whole)
	whole.Close()

	for _, tc := range []struct {
		name         string
		edit         func(*Config)
		pinned, pcie bool
	}{
		{"cache + CPU misses", func(c *Config) { c.TieredExperts, c.ExpertCache = false, 6 }, false, false},
		{"tiered", func(c *Config) {}, true, false},
		{"tiered + pcie-frac", func(c *Config) { c.PCIeFrac = 0.5 }, true, true},
		{"resident", func(c *Config) { c.TieredExperts, c.ResidentExperts = false, true }, true, false},
		{"helpers", func(c *Config) { c.ExpertCacheDevice1, c.ExpertCacheDevice2 = 6, 4 }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			helpers := 0
			probe := DefaultConfig()
			tc.edit(&probe)
			if helperSlotsSet(probe) {
				helpers = 2
			}
			m, err := placeOnStandIns(t, path, tc.edit, helpers)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := run(m); !slices.Equal(got, want) {
				t.Errorf("tokens %v, all on the backend %v", got, want)
			}
			snap := m.Tiers()
			c := snap.Cache
			if c == nil || c.VRAMSlots == 0 || snap.HitsPerTier[TierVRAM] == 0 || snap.HitsPerTier[TierCold]+snap.HitsPerTier[TierPinned] == 0 {
				t.Fatalf("want VRAM hits and misses: cache %+v, hits %v", c, snap.HitsPerTier)
			}
			if c.Streamed == 0 {
				t.Error("the prompt streamed no expert through the ring")
			}
			if tc.pinned && c.PinnedSlots == 0 {
				t.Error("no pinned slots")
			}
			if helpers > 0 && (c.HelperSlots != [2]int{6, 4} || snap.HitsPerTier[TierHelper] == 0) {
				t.Errorf("helper slots %v, %d helper hits: want 6 and 4 slots with hits", c.HelperSlots, snap.HitsPerTier[TierHelper])
			}
			if tc.pcie && c.PCIeReads == 0 {
				t.Error("--pcie-frac 0.5, yet no pinned expert was read over PCIe")
			}
			t.Logf("hits %v, streamed %d, pcie %d", snap.HitsPerTier, c.Streamed, c.PCIeReads)
		})
	}

	info, err := Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if why := GPULacks(info); why != "" {
		t.Errorf("GPULacks(gpt-oss) = %q: its tier modes run on the GPU", why)
	}
}

// TestExpertBiasDeviceBytes: what the plan adds to the GPU's activations for expert biases
// is, for gpt-oss, one float32 set of gate, up and down bias rows for every expert and ring
// slot (a plan filled to its last slot failed at load without them); nothing for a model
// without expert biases.
func TestExpertBiasDeviceBytes(t *testing.T) {
	for _, tc := range []struct{ arch, preset string }{{"gpt-oss", "gptoss-small"}, {"qwen3moe", "tiny"}} {
		spec, err := synth.PresetFor(tc.arch, tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "model.gguf")
		if err := synth.Write(context.Background(), path, spec, nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h, err := model.ReadHparams(f)
		if err != nil {
			t.Fatal(err)
		}
		info, err := describe(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := expertShape(f, info)
		if err != nil {
			t.Fatal(err)
		}
		ring := streamRingSlots(s)
		want := int64(0)
		if tc.arch == "gpt-oss" {
			want = int64(4*(2*h.ExpertFFN+h.Hidden)) * int64(s.Count()+ring)
		}
		if got := expertBiasDeviceBytes(f, s, ring); got != want {
			t.Errorf("%s: %d bytes, want %d (%d experts and %d ring slots of %d x %d)", tc.arch, got, want, s.Count(), ring, h.ExpertFFN, h.Hidden)
		}
	}
}
