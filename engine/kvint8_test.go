package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"strata/engine"
	"strata/engine/fixtures"
)

// TestInt8KVCacheThroughTheEngine: --kv int8 opens qwen3moe and gpt-oss (full-attention
// layers and sliding-window rings) through the public API on the CPU, generates the reference
// continuation up to the first step where the reference's top1-top2 gap is within twice the
// fixture's 8-bit logit bound, and reports a KV cache of a byte per value and a float32
// scale per 32 values (a head's row of 64 costs 72 bytes against f16's 128), or per row
// for a head that is not whole blocks of 32.
func TestInt8KVCacheThroughTheEngine(t *testing.T) {
	for _, fixture := range []string{"qwen3moe-tiny", "gptoss-tiny"} {
		t.Run(fixture, func(t *testing.T) { int8CacheThroughTheEngine(t, fixture) })
	}
}

func int8CacheThroughTheEngine(t *testing.T, fixture string) {
	ref := fixtures.LoadReference(t, fixture)
	gap := 2 * ref.Tolerances.Int8.MaxAbsLogit
	for name, v := range ref.Variants {
		mc := ref.Models[v.Model].Config
		block := 32 // values per scale; a head that is not whole blocks of 32 takes one per row
		if mc.HeadDim%block != 0 {
			block = mc.HeadDim
		}
		cfg := engine.DefaultConfig()
		cfg.Backend, cfg.Threads, cfg.KVType, cfg.MaxContext = "cpu", 2, "int8", 1024
		m, err := engine.Open(context.Background(), filepath.Join(ref.Dir, v.File), cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := m.NewSession(engine.SessionOptions{})
		for _, p := range v.Prompts {
			res, err := s.Generate(context.Background(), p.Tokens, engine.Sampling{MaxTokens: len(p.Generated), IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", name, p.Name, err)
			}
			for i, id := range p.Generated {
				if i >= len(p.Margins.Greedy) || p.Margins.Greedy[i] <= gap {
					same := 0
					for same < len(p.Generated) && res.Tokens[same] == p.Generated[same] {
						same++
					}
					t.Logf("%s %s: held to %d of %d steps; the first %d are the reference's", name, p.Name, i, len(p.Generated), same)
					break
				}
				if res.Tokens[i] != id {
					t.Errorf("%s %s: step %d: token %d, want %d (reference gap %.2f)", name, p.Name, i, res.Tokens[i], id, p.Margins.Greedy[i])
					break
				}
			}
		}
		info := m.Info()
		var kvBytes int64
		for _, u := range m.Tiers().Memory {
			if u.Kind == "kv cache" {
				kvBytes += u.Bytes
			}
		}
		perPos := int64(2 * mc.KVHeads * (mc.HeadDim + 4*mc.HeadDim/block))
		full := int64(info.Layers - info.RingLayers - info.RecurrentLayers)
		if want := perPos * (full*int64(cfg.MaxContext) + int64(info.RingLayers)*int64(info.RingKeep)); kvBytes != want {
			t.Errorf("%s: an int8 KV cache of %d positions is reported as %d bytes, want %d", name, cfg.MaxContext, kvBytes, want)
		}
		m.Close()
	}
}
