package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine"
	"strata/engine/fixtures"
)

// TestRecurrentStateReuse: on a Gated DeltaNet hybrid, whose state cannot be truncated like a
// KV cache, a regenerated reply, an edited last message, a next turn and a new chat give the
// tokens of a fresh run, and a regenerate re-reads only the prompt's last token.
func TestRecurrentStateReuse(t *testing.T) {
	recurrentStateReuse(t, "cpu")
}

// recurrentStateReuse is TestRecurrentStateReuse on a backend: "cpu" runs the float path,
// "cuda" the GPU (its state in VRAM, checkpoints device copies).
func recurrentStateReuse(t *testing.T, backend string) {
	dir := fixtures.Path(t, "qwen35moe-tiny")
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Variants map[string]struct {
			File    string      `json:"file"`
			Prompts []refPrompt `json:"prompts"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	v, ok := ref.Variants["f32"]
	if !ok || len(v.Prompts) < 2 {
		t.Fatal("reference.json has no f32 variant with two prompts")
	}
	long := v.Prompts[len(v.Prompts)-1]
	other := v.Prompts[len(v.Prompts)-2]
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.FloatPath, cfg.MaxContext = backend, 2, backend == "cpu", 256
	open := func() *engine.Model {
		m, err := engine.Open(context.Background(), filepath.Join(dir, v.File), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	sp := engine.Sampling{MaxTokens: 8, IgnoreEOS: true}
	gen := func(s *engine.Session, prompt []int) engine.Result {
		t.Helper()
		res, err := s.Generate(context.Background(), prompt, sp, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	fresh := func(prompt []int) []int { return gen(open().NewSession(engine.SessionOptions{}), prompt).Tokens }

	m := open()
	s := m.NewSession(engine.SessionOptions{})
	first := gen(s, long.Tokens)
	if want := long.Generated[:len(first.Tokens)]; !slices.Equal(first.Tokens, want) {
		t.Fatalf("first reply %v, want the reference %v", first.Tokens, want)
	}
	again := gen(s, long.Tokens)
	if !slices.Equal(again.Tokens, first.Tokens) {
		t.Errorf("regenerate: %v, want %v", again.Tokens, first.Tokens)
	}
	if again.Timings.PromptTokens != 1 {
		t.Errorf("regenerate re-read %d prompt tokens, want 1 (the checkpoint before the last)", again.Timings.PromptTokens)
	}
	next := append(append(slices.Clone(long.Tokens), again.Tokens...), other.Tokens...)
	if got, want := gen(s, next).Tokens, fresh(next); !slices.Equal(got, want) {
		t.Errorf("next turn: %v, a fresh run gives %v", got, want)
	}
	edited := append(slices.Clone(long.Tokens[:len(long.Tokens)/2]), other.Tokens...)
	if got, want := gen(s, edited).Tokens, fresh(edited); !slices.Equal(got, want) {
		t.Errorf("edited message: %v, a fresh run gives %v", got, want)
	}
	s2 := m.NewSession(engine.SessionOptions{})
	if got, want := gen(s2, other.Tokens).Tokens, other.Generated[:sp.MaxTokens]; !slices.Equal(got, want) {
		t.Errorf("new chat: %v, want the reference %v", got, want)
	}
	if got := gen(s, long.Tokens).Tokens; !slices.Equal(got, first.Tokens) {
		t.Errorf("back to the first chat: %v, want %v", got, first.Tokens)
	}
}
