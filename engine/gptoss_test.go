package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine"
	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/synth"
)

// gptOssReference is the part of gptoss-tiny/reference.json these tests read.
type gptOssReference struct {
	Models map[string]struct {
		Config struct {
			Layers        int      `json:"num_hidden_layers"`
			KVHeads       int      `json:"num_key_value_heads"`
			HeadDim       int      `json:"head_dim"`
			SlidingWindow int      `json:"sliding_window"`
			LayerTypes    []string `json:"layer_types"`
		} `json:"transformers_config"`
	} `json:"models"`
	Variants map[string]struct {
		File    string      `json:"file"`
		Model   string      `json:"model"`
		Prompts []refPrompt `json:"prompts"`
	} `json:"variants"`
}

// TestGptOssThroughTheEngine: gpt-oss opens through the public API on the CPU, generates the
// reference continuations on the float path, and its KV cache costs the full context on the
// full-attention layers only: the sliding ones hold a ring whatever the context.
func TestGptOssThroughTheEngine(t *testing.T) {
	dir := fixtures.Path(t, "gptoss-tiny")
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref gptOssReference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	for name, v := range ref.Variants {
		cfg := engine.DefaultConfig()
		cfg.Backend, cfg.Threads, cfg.FloatPath = "cpu", 2, true
		cfg.MaxContext = 2048 // well past the window and its ring
		m, err := engine.Open(context.Background(), filepath.Join(dir, v.File), cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := m.NewSession(engine.SessionOptions{})
		for _, p := range v.Prompts {
			res, err := s.Generate(context.Background(), p.Tokens, engine.Sampling{MaxTokens: len(p.Generated), IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", name, p.Name, err)
			}
			if !slices.Equal(res.Tokens, p.Generated) {
				t.Errorf("%s %s: tokens %v, want %v", name, p.Name, res.Tokens, p.Generated)
			}
		}
		mc := ref.Models[v.Model].Config
		sliding := 0
		for _, lt := range mc.LayerTypes {
			if lt == "sliding_attention" {
				sliding++
			}
		}
		info := m.Info()
		if info.RingLayers != sliding || info.RingKeep < mc.SlidingWindow || info.RingKeep >= cfg.MaxContext {
			t.Errorf("%s: %d ring layers keeping %d positions; the model has %d sliding layers of window %d", name, info.RingLayers, info.RingKeep, sliding, mc.SlidingWindow)
		}
		var kvBytes int64
		for _, u := range m.Tiers().Memory {
			if u.Kind == "kv cache" {
				kvBytes += u.Bytes
			}
		}
		perPos := int64(2 * mc.KVHeads * mc.HeadDim * 4) // keys and values, float32 on the float path
		want := perPos * (int64(mc.Layers-sliding)*int64(cfg.MaxContext) + int64(sliding)*int64(info.RingKeep))
		if kvBytes != want {
			t.Errorf("%s: the KV cache of %d positions is reported as %d bytes, want %d", name, cfg.MaxContext, kvBytes, want)
		}
		m.Close()
	}
}

// TestGptOssTiersOnTheCPU: on a small synthetic gpt-oss model, every expert placement the
// CPU has (all on the backend; resident: every expert in the RAM arena, half of them with the
// rest read from the file, and the arena filled from experts.bin) gives the same greedy
// tokens, with the biases of pinned and cold experts each in their own order.
func TestGptOssTiersOnTheCPU(t *testing.T) {
	spec, err := synth.PresetFor("gpt-oss", "gptoss-small")
	if err != nil {
		t.Fatal(err)
	}
	spec.Pool, spec.Zipf = 256, 1
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	info, err := engine.Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int{{5, 77, 300, 12, 9, 400, 41, 8, 100, 3, 250, 19}, {260}}
	run := func(what string, cfg engine.Config) ([][]int, *engine.CacheActivity) {
		m, err := engine.Open(context.Background(), path, cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer m.Close()
		s := m.NewSession(engine.SessionOptions{})
		var out [][]int
		for _, p := range prompts {
			res, err := s.Generate(context.Background(), p, engine.Sampling{MaxTokens: 12, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			out = append(out, res.Tokens)
		}
		return out, m.Tiers().Cache
	}
	base := engine.DefaultConfig()
	base.Backend, base.Threads, base.MaxContext, base.LearnProfile = "cpu", 2, 64, false
	want, _ := run("all on the backend", base)
	half := float64(info.ExpertBytes) / 2 / (1 << 30)
	for _, c := range []struct {
		name   string
		budget float64
		pack   bool
	}{{"resident, all pinned", 0, false}, {"resident, half pinned", half, false}, {"resident from experts.bin", 0, true}} {
		if c.pack {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = experts.Pack(context.Background(), f, dir, nil)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		cfg := base
		cfg.ResidentExperts, cfg.ResidentBudgetGiB = true, c.budget
		got, snap := run(c.name, cfg)
		if snap == nil || snap.ArenaBytes == 0 || c.pack != snap.ArenaFromPack {
			t.Errorf("%s: cache %+v", c.name, snap)
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s: prompt %d: tokens %v, want %v (all on the backend)", c.name, i, got[i], want[i])
			}
		}
	}
}
