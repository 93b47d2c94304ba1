package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/compute/gpu"
	"strata/engine/fixtures"
	"strata/engine/synth"
)

// nearTieGap: a greedy continuation on the GPU (8-bit activations, f16 KV) is held to the
// reference up to the first step whose reference top1-top2 gap is below this (the fixture
// README: where greedy parts, look at the margins first).
const nearTieGap = 0.05

// skipWithoutGPU skips where there is no NVIDIA driver or GPU (here; CI).
func skipWithoutGPU(t *testing.T) {
	t.Helper()
	b, err := gpu.New(gpu.Options{})
	if errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// TestHybridOnCUDA opens every qwen35moe-tiny variant with --backend cuda, all in VRAM and with
// the expert tier knobs (VRAM cache with CPU misses, pinned experts read over PCIe, streamed
// batches, adaptive swaps), and expects the reference continuations up to the first near tie.
func TestHybridOnCUDA(t *testing.T) {
	ref := fixtures.LoadReference(t, "qwen35moe-tiny")
	skipWithoutGPU(t)
	for _, v := range ref.All() {
		for _, knobs := range []struct {
			name string
			set  func(*engine.Config)
		}{
			{"all in VRAM", func(c *engine.Config) {}},
			{"cache 20", func(c *engine.Config) { c.ExpertCache = 20 }},
			{"tiered + pcie", func(c *engine.Config) { c.ExpertCache, c.TieredExperts, c.PCIeFrac = 16, true, 0.5 }},
			{"pcie alone", func(c *engine.Config) { c.ExpertCache, c.PCIeFrac = 16, 1 }},
			{"adaptive", func(c *engine.Config) { c.ExpertCache, c.AdaptEvery = 16, 4 }},
		} {
			t.Run(v.Name+"/"+knobs.name, func(t *testing.T) {
				cfg := engine.DefaultConfig()
				cfg.Backend, cfg.MaxContext, cfg.LearnProfile = "cuda", 128, false
				knobs.set(&cfg)
				m, err := engine.Open(context.Background(), ref.Path(v), cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if !strings.HasPrefix(m.Backend(), "cuda") {
					t.Fatalf("backend %q, want cuda", m.Backend())
				}
				s := m.NewSession(engine.SessionOptions{})
				for _, p := range v.Prompts {
					res, err := s.Generate(context.Background(), p.Tokens, engine.Sampling{MaxTokens: len(p.Generated), IgnoreEOS: true}, nil)
					if err != nil {
						t.Fatalf("%s: %v", p.Name, err)
					}
					checked := 0
					for i, id := range res.Tokens {
						if i >= len(p.Generated) || (i < len(p.Margins.Greedy) && p.Margins.Greedy[i] < nearTieGap) {
							break
						}
						if id != p.Generated[i] {
							t.Errorf("%s: tokens %v, want %v (step %d, reference gap %.3g)", p.Name, res.Tokens, p.Generated, i, p.Margins.Greedy[i])
							break
						}
						checked++
					}
					t.Logf("%s: %d of %d tokens checked, %d the same as the reference in all", p.Name, checked, len(p.Generated), same(res.Tokens, p.Generated))
				}
			})
		}
	}
}

func same(a, b []int) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			n++
		}
	}
	return n
}

// TestRecurrentStateReuseOnCUDA is TestRecurrentStateReuse with the state in VRAM.
func TestRecurrentStateReuseOnCUDA(t *testing.T) {
	fixtures.Path(t, "qwen35moe-tiny")
	skipWithoutGPU(t)
	recurrentStateReuse(t, "cuda")
}

// TestPlanRefusesHybridShapesPastTheGPU: a hybrid whose delta-rule key heads are wider than
// the GPU kernel takes is planned for the CPU by name, and --backend cuda is refused naming it,
// while the published width plans the GPU.
func TestPlanRefusesHybridShapesPastTheGPU(t *testing.T) {
	mc := engine.Machine{GPUFreeBytes: 16 << 30, HostAvailBytes: 16 << 30}
	for _, kd := range []int{64, 512} {
		spec, err := synth.PresetFor("qwen3next", "tiny")
		if err != nil {
			t.Fatal(err)
		}
		spec.Hybrid.KDim, spec.Pool = kd, 256
		path := filepath.Join(t.TempDir(), "model.gguf")
		if err := synth.Write(context.Background(), path, spec, nil); err != nil {
			t.Fatal(err)
		}
		cfg := engine.DefaultConfig()
		cfg.Backend = "cuda"
		_, _, err = engine.PlanForMachine(context.Background(), path, cfg, mc)
		if kd == 64 {
			if err != nil {
				t.Errorf("key heads of %d: %v", kd, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "Gated DeltaNet") || !strings.Contains(err.Error(), "512") {
			t.Errorf("key heads of %d, --backend cuda: %v, want a refusal naming them", kd, err)
		}
		cfg.Backend = "auto"
		p, _, err := engine.PlanForMachine(context.Background(), path, cfg, mc)
		if err != nil || p.VRAMLimit != 0 || p.Slots != 0 || !strings.Contains(strings.Join(p.Notes, "\n"), "Gated DeltaNet") {
			t.Errorf("key heads of %d, auto: VRAM limit %d, %d slots, notes %q (%v), want the CPU with the reason", kd, p.VRAMLimit, p.Slots, p.Notes, err)
		}
	}
}
