package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/quant"
	"strata/engine/synth"
)

type refPrompt struct {
	Name      string `json:"name"`
	Tokens    []int  `json:"tokens"`
	Generated []int  `json:"generated"`
}

func qwenVariants(t *testing.T) (dir string, files map[string]string, prompts map[string][]refPrompt) {
	t.Helper()
	dir = fixtures.Path(t, "qwen3moe-tiny")
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
	files, prompts = map[string]string{}, map[string][]refPrompt{}
	for name, v := range ref.Variants {
		files[name] = filepath.Join(dir, v.File)
		prompts[name] = v.Prompts
	}
	return dir, files, prompts
}

// variantFile is the file of the named variant; the test is skipped by name when this
// fixture set has none.
func variantFile(t *testing.T, files map[string]string, name string) string {
	t.Helper()
	path, ok := files[name]
	if !ok {
		t.Skipf("fixtures: qwen3moe-tiny has no %q variant, skipping", name)
	}
	return path
}

// TestGenerateGreedyMatchesReference drives the public API the way `strata run --tokens`
// does and expects the reference continuation, on both CPU paths.
func TestGenerateGreedyMatchesReference(t *testing.T) {
	_, files, prompts := qwenVariants(t)
	for name, path := range files {
		for _, float := range []bool{true, false} {
			cfg := engine.DefaultConfig()
			cfg.Backend, cfg.Threads, cfg.FloatPath, cfg.MaxContext = "cpu", 2, float, 128
			m, err := engine.Open(context.Background(), path, cfg, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			s := m.NewSession(engine.SessionOptions{})
			for _, p := range prompts[name] {
				var streamed []int
				res, err := s.Generate(context.Background(), p.Tokens, engine.Sampling{MaxTokens: len(p.Generated), IgnoreEOS: true},
					func(tok engine.Token) { streamed = append(streamed, tok.ID) })
				if err != nil {
					t.Fatalf("%s %s: %v", name, p.Name, err)
				}
				if !slices.Equal(res.Tokens, p.Generated) {
					t.Errorf("%s %s float=%v: tokens %v, want %v", name, p.Name, float, res.Tokens, p.Generated)
				}
				if res.Stop != engine.StopMaxTokens {
					t.Errorf("%s %s: stop %q, want max_tokens", name, p.Name, res.Stop)
				}
			}
			m.Close()
		}
	}
}

func TestGenerateHonoursCancellation(t *testing.T) {
	_, files, prompts := qwenVariants(t)
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.MaxContext = "cpu", 256
	m, err := engine.Open(context.Background(), variantFile(t, files, "f32"), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := m.NewSession(engine.SessionOptions{}).Generate(ctx, prompts["f32"][0].Tokens, engine.Sampling{IgnoreEOS: true},
		func(engine.Token) {
			if n++; n == 3 {
				cancel()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != engine.StopCancelled || len(res.Tokens) != 3 {
		t.Errorf("stop %q after %d tokens, want cancelled after 3", res.Stop, len(res.Tokens))
	}
}

func TestPromptLongerThanContextIsAClearError(t *testing.T) {
	_, files, _ := qwenVariants(t)
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.MaxContext = "cpu", 8
	m, err := engine.Open(context.Background(), variantFile(t, files, "f32"), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.NewSession(engine.SessionOptions{}).Generate(context.Background(), make([]int, 20), engine.Sampling{MaxTokens: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "--max-context") {
		t.Fatalf("err = %v, want one that suggests --max-context", err)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.gguf")
	os.WriteFile(notGGUF, []byte("this is not a model file at all, just text"), 0o644)
	_, files, _ := qwenVariants(t)
	whole, err := os.ReadFile(fixtures.LoadReference(t, "qwen3moe-tiny").Smallest())
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.gguf")
	os.WriteFile(truncated, whole[:len(whole)/2], 0o644)
	other := filepath.Join(dir, "other.gguf")
	w := gguf.NewWriter()
	w.AddString("general.architecture", "no-such-arch")
	if err := w.WriteFile(other); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string
		kind             error
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), "nope.gguf", engine.ErrNotFound},
		{"not gguf", notGGUF, "notes.gguf", engine.ErrNotGGUF},
		{"truncated", truncated, "truncated.gguf", engine.ErrDamaged},
		{"other architecture", other, "no-such-arch", engine.ErrUnsupportedArch},
	}
	kinds := []error{engine.ErrNotFound, engine.ErrNotGGUF, engine.ErrDamaged, engine.ErrUnsupportedArch, engine.ErrBudgetTooSmall, engine.ErrOutOfVRAM, engine.ErrCanceled}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := engine.DefaultConfig()
			cfg.Backend = "cpu"
			_, err := engine.Open(context.Background(), c.path, cfg, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an error naming %q", err, c.want)
			}
			_, ierr := engine.Inspect(context.Background(), c.path)
			// The kind survives the engine's wrapping, and only that kind matches.
			for _, k := range kinds {
				if errors.Is(err, k) != (k == c.kind) || errors.Is(ierr, k) != (k == c.kind) {
					t.Errorf("errors.Is(%v, %v) = %v, Inspect's %v", err, k, errors.Is(err, k), errors.Is(ierr, k))
				}
			}
		})
	}
	// A cancelled open, and a VRAM budget below the non-expert weights (planned for a given
	// GPU on the synthetic model, whose head size the GPU kernels take).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg0 := engine.DefaultConfig()
	cfg0.Backend = "cpu"
	if _, err := engine.Open(ctx, fixtures.LoadReference(t, "qwen3moe-tiny").Smallest(), cfg0, nil); !errors.Is(err, engine.ErrCanceled) {
		t.Errorf("cancelled open: %v, want ErrCanceled", err)
	}
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant = quant.Q8_0 // quicker to write than the preset's Q4_K
	synthPath := filepath.Join(dir, "synth.gguf")
	if err := synth.Write(context.Background(), synthPath, spec, nil); err != nil {
		t.Fatal(err)
	}
	cfg0 = engine.DefaultConfig()
	cfg0.VRAMBudgetMiB = 1
	if _, _, err := engine.PlanForMachine(context.Background(), synthPath, cfg0, engine.Machine{GPUFreeBytes: 2000 << 20, HostAvailBytes: 16 << 30}); !errors.Is(err, engine.ErrBudgetTooSmall) {
		t.Errorf("1 MiB VRAM budget: %v, want ErrBudgetTooSmall", err)
	}
	cfg := engine.DefaultConfig()
	cfg.PCIeFrac = 2
	if _, err := engine.Open(context.Background(), variantFile(t, files, "f32"), cfg, nil); err == nil || !strings.Contains(err.Error(), "--pcie-frac") {
		t.Errorf("bad knob: err = %v", err)
	}
	if _, err := engine.Inspect(context.Background(), notGGUF); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("Inspect(not gguf) = %v", err)
	}
}

// TestInspectDescribesTheModel checks Inspect against what reference.json says of every
// variant.
func TestInspectDescribesTheModel(t *testing.T) {
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	for _, v := range ref.All() {
		info, err := engine.Inspect(context.Background(), ref.Path(v))
		if err != nil {
			t.Fatal(err)
		}
		c := ref.Model(t, v).Config
		if info.Architecture != "qwen3moe" || info.Layers != c.Layers || info.Experts != c.ExpertCount() ||
			info.ExpertsUsed != c.ExpertsUsed || info.Vocab != c.Vocab || info.HeadDim != c.HeadDim {
			t.Errorf("%s: info = %+v, reference.json model %+v", v.File, info, c)
		}
		if v.Bytes > 0 && info.FileBytes != v.Bytes {
			t.Errorf("%s: %d bytes, reference.json says %d", v.File, info.FileBytes, v.Bytes)
		}
		if info.ExpertBytes <= 0 || info.NonExpertBytes <= 0 || info.ExpertBytes+info.NonExpertBytes > info.FileBytes {
			t.Errorf("%s: bytes: experts %d + rest %d vs file %d", v.File, info.ExpertBytes, info.NonExpertBytes, info.FileBytes)
		}
		if info.ActiveParams >= info.TotalParams || info.ActiveParams <= 0 {
			t.Errorf("%s: params: active %d of %d", v.File, info.ActiveParams, info.TotalParams)
		}
		// The quantisation named is the type that holds the most bytes in reference.json.
		byType := map[string]int64{}
		for _, rt := range v.Tensors {
			typ, err := quant.ParseType(rt.Type)
			if err != nil {
				t.Fatalf("%s: %s: %v", v.File, rt.Name, err)
			}
			row, err := quant.RowBytes(typ, rt.Ne[0])
			if err != nil {
				t.Fatalf("%s: %s: %v", v.File, rt.Name, err)
			}
			n := int64(row)
			for _, d := range rt.Ne[1:] {
				n *= int64(d)
			}
			byType[typ.String()] += n
		}
		var most string
		for typ, n := range byType {
			if most == "" || n > byType[most] {
				most = typ
			}
		}
		if info.Quantization != most {
			t.Errorf("%s: quantization %q, the type with the most bytes is %s (%v)", v.File, info.Quantization, most, byType)
		}
	}
}

// TestSessionsShareOneCache: a second conversation takes the model's KV cache, and the first
// one still answers correctly afterwards (it re-reads its prompt), so switching chats never
// allocates another full-context cache.
func TestSessionsShareOneCache(t *testing.T) {
	_, files, prompts := qwenVariants(t)
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.MaxContext = "cpu", 128
	m, err := engine.Open(context.Background(), variantFile(t, files, "f32"), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := prompts["f32"][len(prompts["f32"])-1] // the longest
	sp := engine.Sampling{MaxTokens: len(p.Generated), IgnoreEOS: true}
	a, b := m.NewSession(engine.SessionOptions{}), m.NewSession(engine.SessionOptions{})
	for i, s := range []*engine.Session{a, b, a, a} {
		res, err := s.Generate(context.Background(), p.Tokens, sp, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tokens, p.Generated) {
			t.Fatalf("call %d: tokens %v, want %v", i, res.Tokens, p.Generated)
		}
		if i == 3 && res.Timings.PromptTokens != 1 {
			t.Errorf("the same prompt again re-read %d tokens, want 1 (the cached prefix reused)", res.Timings.PromptTokens)
		}
	}
}
