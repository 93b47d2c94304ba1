package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/synth"
)

// TestHybridTiersGiveTheSameTokens: a small synthetic qwen35moe and qwen3next give the same
// greedy tokens with every expert on the backend, all in the RAM arena, half of them cold,
// and from an experts.bin; the shared experts count with the non-expert weights, the plan
// and the tier map cover every routed expert, and the memory bars show the KV cache of the
// attention layers only beside the recurrent state.
func TestHybridTiersGiveTheSameTokens(t *testing.T) {
	for _, arch := range []string{"qwen35moe", "qwen3next"} {
		spec, err := synth.PresetFor(arch, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		spec.Pool = 256
		dir := t.TempDir()
		path := filepath.Join(dir, "model.gguf")
		if err := synth.Write(context.Background(), path, spec, nil); err != nil {
			t.Fatal(err)
		}
		info, err := engine.Inspect(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var routed, shared, all int64
		for _, ti := range f.Tensors {
			all += ti.Size
			switch {
			case strings.Contains(ti.Name, "_exps."):
				routed += ti.Size
			case strings.Contains(ti.Name, "_shexp."):
				shared += ti.Size
			}
		}
		if info.ExpertBytes != routed || shared == 0 || info.NonExpertBytes != all-routed {
			t.Errorf("%s: expert bytes %d (routed %d), non-expert %d (shared experts %d)", arch, info.ExpertBytes, routed, info.NonExpertBytes, shared)
		}
		if want := spec.Layers - spec.Layers/spec.Hybrid.AttnEvery; info.RecurrentLayers != want || info.RecurrentBytes <= 0 {
			t.Errorf("%s: %d recurrent layers (%d bytes), want %d", arch, info.RecurrentLayers, info.RecurrentBytes, want)
		}
		half := float64(info.ExpertBytes) / 2 / (1 << 30)
		var want []int
		prompt := []int{10, 200, 31, 4, 77, 150, 9}
		for i, tc := range []struct {
			name string
			edit func(*engine.Config)
		}{
			{"backend", func(*engine.Config) {}},
			{"arena", func(c *engine.Config) { c.ResidentExperts = true }},
			{"half cold", func(c *engine.Config) { c.ResidentExperts, c.ResidentBudgetGiB = true, half }},
			{"experts.bin", func(c *engine.Config) { c.ResidentExperts = true }},
		} {
			if tc.name == "experts.bin" {
				if _, err := experts.Pack(context.Background(), f, dir, nil); err != nil {
					t.Fatal(err)
				}
			}
			cfg := engine.DefaultConfig()
			cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 64, false
			tc.edit(&cfg)
			m, err := engine.Open(context.Background(), path, cfg, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", arch, tc.name, err)
			}
			res, err := m.NewSession(engine.SessionOptions{}).Generate(context.Background(), prompt, engine.Sampling{MaxTokens: 8, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", arch, tc.name, err)
			}
			if i == 0 {
				want = res.Tokens
			} else if !slices.Equal(res.Tokens, want) {
				t.Errorf("%s %s: tokens %v, with every expert on the backend %v", arch, tc.name, res.Tokens, want)
			}
			snap := m.Tiers()
			if len(snap.Tier) != spec.Layers || len(snap.Tier[0]) != spec.Experts {
				t.Errorf("%s %s: tier map %d x %d, want %d x %d", arch, tc.name, len(snap.Tier), len(snap.Tier[0]), spec.Layers, spec.Experts)
			}
			cold := 0
			for _, row := range snap.Tier {
				for _, tier := range row {
					if tier == engine.TierCold {
						cold++
					}
				}
			}
			if (tc.name == "half cold") != (cold > 0) {
				t.Errorf("%s %s: %d experts cold", arch, tc.name, cold)
			}
			var kvb, rec int64
			for _, u := range snap.Memory {
				switch u.Kind {
				case "kv cache":
					kvb += u.Bytes
				case "recurrent state":
					rec += u.Bytes
				}
			}
			attn := int64(spec.Layers / spec.Hybrid.AttnEvery)
			if perPos := int64(2 * spec.KVHeads * spec.HeadDim * 2); kvb != attn*perPos*int64(cfg.MaxContext) || rec != info.RecurrentBytes {
				t.Errorf("%s %s: kv cache %d bytes (want %d f16 on %d attention layers), recurrent state %d (want %d)",
					arch, tc.name, kvb, attn*perPos*int64(cfg.MaxContext), attn, rec, info.RecurrentBytes)
			}
			m.Close()
		}
		p, pinfo, err := engine.PlanFor(context.Background(), path, func() engine.Config {
			c := engine.DefaultConfig()
			c.Backend = "cpu"
			return c
		}())
		if err != nil {
			t.Fatal(err)
		}
		if n := p.Counts()[experts.TierCPU]; n != spec.Layers*spec.Experts || p.NonExpertBytes < pinfo.NonExpertBytes+pinfo.RecurrentBytes {
			t.Errorf("%s: plan puts %d experts on the CPU, non-expert bytes %d", arch, n, p.NonExpertBytes)
		}
		f.Close()
	}
}
