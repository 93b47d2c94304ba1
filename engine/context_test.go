package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/kv"
	"strata/engine/quant"
	"strata/engine/synth"
)

// tinyWith writes the synthetic tiny qwen3moe model after change edits its spec.
func tinyWith(t *testing.T, change func(*synth.Spec)) string {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant = quant.Q8_0
	if change != nil {
		change(&spec)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMaxContextAboveTheModelsLimitIsRefused: --max-context above the file's context_length
// is refused by Open and the plan with the numbers; YaRN in a qwen3moe file raises the limit
// to its factor x original context, and Open runs such a context.
func TestMaxContextAboveTheModelsLimitIsRefused(t *testing.T) {
	ctx := context.Background()
	plain := tinyWith(t, nil) // context_length 4096, no YaRN
	yarn := tinyWith(t, func(s *synth.Spec) { s.Context, s.YarnFactor, s.YarnOrigContext = 1024, 4, 1024 })
	for _, tc := range []struct {
		path  string
		limit int
		words string
	}{{plain, 4096, "YaRN is not configured"}, {yarn, 4096, "YaRN in the file"}} {
		info, err := Inspect(ctx, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if info.ContextLimit != tc.limit {
			t.Errorf("%s: context limit %d, want %d", tc.words, info.ContextLimit, tc.limit)
		}
		cfg := DefaultConfig()
		cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 2, tc.limit+1
		var ce *ConfigError
		_, err = Open(ctx, tc.path, cfg, nil)
		if !errors.As(err, &ce) || ce.Flag != "max-context" || !strings.Contains(err.Error(), fmt.Sprint(tc.limit)) || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("Open at %d tokens: %v, want a --max-context error naming the limit %d and %q", cfg.MaxContext, err, tc.limit, tc.words)
		}
		if _, _, err := PlanFor(ctx, tc.path, cfg); !errors.As(err, &ce) || ce.Flag != "max-context" {
			t.Errorf("plan at %d tokens: %v, want the same refusal", cfg.MaxContext, err)
		}
		cfg.MaxContext = tc.limit
		m, err := Open(ctx, tc.path, cfg, nil)
		if err != nil {
			t.Fatalf("Open at the limit: %v", err)
		}
		if got := m.Config().MaxContext; got != tc.limit {
			t.Errorf("opened with %d tokens, want %d", got, tc.limit)
		}
		m.Close()
	}
}

// TestYarnChangesQwen3moeRope: a qwen3moe file with YaRN runs the scaled rotation (its
// logits differ from the same weights without it) and without NaNs.
func TestYarnChangesQwen3moeRope(t *testing.T) {
	tokens := []int{5, 17, 99, 3, 250, 42, 7, 300}
	run := func(path string) []float32 {
		m := openCPU(t, path)
		var last []float32
		if err := m.NewSession(SessionOptions{}).Eval(context.Background(), tokens, func(pos int, l []float32) {
			if pos == len(tokens)-1 {
				last = append([]float32(nil), l...)
			}
		}); err != nil {
			t.Fatal(err)
		}
		return last
	}
	plain := run(tinyWith(t, nil))
	scaled := run(tinyWith(t, func(s *synth.Spec) { s.YarnFactor, s.YarnOrigContext = 4, 1024 }))
	var diff float64
	for i := range plain {
		if math.IsNaN(float64(scaled[i])) {
			t.Fatalf("logit %d is NaN with YaRN", i)
		}
		diff = max(diff, math.Abs(float64(plain[i]-scaled[i])))
	}
	if diff == 0 {
		t.Error("YaRN in the file left the logits unchanged: the scaled rotation is not applied")
	}
}

// TestContextBeyondMemoryIsRefusedWithChoices: a --max-context whose KV cache does not fit
// says how much it needs, how much there is, and what fits instead.
func TestContextBeyondMemoryIsRefusedWithChoices(t *testing.T) {
	// Qwen3-30B-A3B's attention: 48 layers, 4 KV heads of 128: 96 KiB a token in f16.
	info := ModelInfo{Architecture: "qwen3moe", Layers: 48, KVHeads: 4, HeadDim: 128, ContextLength: 262144, ContextLimit: 262144}
	cfg := DefaultConfig()
	cfg.MaxContext = 262144
	budget := int64(16) << 30
	err := checkContextFits(cfg, info, budget)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Flag != "max-context" {
		t.Fatalf("256k tokens in 16 GiB: %v, want a --max-context error", err)
	}
	f16 := kv.Bytes(48, 4, 128, 262144, kv.F16)
	i8 := kv.Bytes(48, 4, 128, 262144, kv.Int8)
	fit := int(budget / kv.Bytes(48, 4, 128, 1, kv.F16))
	fit -= fit % 256
	for _, want := range []string{"262144 tokens", gibs(f16), "96.0 KiB a token", gibs(budget), "--kv int8 (" + gibs(i8) + ", fits)", fmt.Sprintf("--max-context %d", fit)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := checkContextFits(cfg, info, f16); err != nil {
		t.Errorf("a budget of exactly the cache: %v", err)
	}
	cfg.KVType = "int8"
	if err := checkContextFits(cfg, info, budget); err != nil {
		t.Errorf("256k tokens of int8 cache (%s) in 16 GiB: %v", gibs(i8), err)
	}
	// A hybrid's recurrent state counts beside its attention layers' cache.
	hy := ModelInfo{Layers: 48, RecurrentLayers: 36, RecurrentBytes: 1 << 30, KVHeads: 2, HeadDim: 256}
	cfg.KVType, cfg.MaxContext = "f16", 1024
	need := kv.Bytes(12, 2, 256, 1024, kv.F16) + 1<<30
	if checkContextFits(cfg, hy, need) != nil || checkContextFits(cfg, hy, need-1) == nil {
		t.Errorf("the recurrent state (1 GiB) is not counted with the cache (%d bytes)", need)
	}
}

// TestPromptLongerThanTheContextIsRefused: Eval and Generate refuse a prompt that does not
// fit with the numbers and the fix, as ErrContextFull, never a panic.
func TestPromptLongerThanTheContextIsRefused(t *testing.T) {
	m := openCPU(t, synthModel(t)) // 256 positions
	long := make([]int, 300)
	for i := range long {
		long[i] = i % 200
	}
	s := m.NewSession(SessionOptions{})
	err := s.Eval(context.Background(), long, func(int, []float32) {})
	if !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "300 tokens") || !strings.Contains(err.Error(), "holds 256") || !strings.Contains(err.Error(), "--max-context") {
		t.Errorf("eval of 300 tokens in 256: %v", err)
	}
	_, err = s.Generate(context.Background(), long[:256], Sampling{MaxTokens: 1}, nil)
	if !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "at least 257") {
		t.Errorf("generate from 256 tokens in 256: %v, want room for the sampled token asked for", err)
	}
	if err := s.Eval(context.Background(), long[:256], func(int, []float32) {}); err != nil {
		t.Errorf("eval of exactly the context: %v", err)
	}
}

// TestChunkedPrefillMatchesOnePass: a prompt read in chunks of 7 tokens gives the logits of
// reading it in one pass (the scratch is sized from the chunk), on qwen3moe to float
// round-off and on a hybrid within 1% of the logits' RMS: its Gated DeltaNet layers sum a
// chunk's tokens in the block (WY) form, so other chunk ends regroup those sums, and the
// synthetic weights amplify what round-off differs (decode, one token a pass, differs from
// either by as much on qwen3moe too).
func TestChunkedPrefillMatchesOnePass(t *testing.T) {
	hybrid, err := synth.PresetFor("qwen35moe", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	hybrid.Quant = quant.Q8_0
	hpath := filepath.Join(t.TempDir(), "hybrid.gguf")
	if err := synth.Write(context.Background(), hpath, hybrid, nil); err != nil {
		t.Fatal(err)
	}
	tokens := make([]int, 61)
	for i := range tokens {
		tokens[i] = (i*37 + 11) % 256
	}
	for name, path := range map[string]string{"qwen3moe": synthModel(t), "qwen35moe": hpath} {
		tol := map[string]float64{"qwen3moe": 1e-4, "qwen35moe": 0.01}[name]
		logits := func(prefill int) [][]float32 {
			cfg := DefaultConfig()
			cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.Prefill = "cpu", 2, 256, prefill
			m, err := Open(context.Background(), path, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var out [][]float32
			if err := m.NewSession(SessionOptions{}).Eval(context.Background(), tokens, func(_ int, l []float32) {
				out = append(out, append([]float32(nil), l...))
			}); err != nil {
				t.Fatal(err)
			}
			if m.kvState.ScratchTokens() > prefill {
				t.Errorf("%s: scratch for %d tokens with chunks of %d", name, m.kvState.ScratchTokens(), prefill)
			}
			return out
		}
		one, chunked := logits(len(tokens)), logits(7)
		for p := range one {
			var d2, r2 float64
			for i := range one[p] {
				d := float64(one[p][i] - chunked[p][i])
				d2 += d * d
				r2 += float64(one[p][i]) * float64(one[p][i])
			}
			if rel := math.Sqrt(d2 / r2); rel > tol {
				t.Errorf("%s: position %d: chunked logits differ by %.2g of their RMS", name, p, rel)
			}
		}
	}
}
