package engine_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/synth"
)

// splitInThree writes the model at path as three parts with the project's GGUF writer, in
// the layout of llama.cpp's gguf-split, and returns their paths.
func splitInThree(t *testing.T, path string) []string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prefix := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".gguf"))
	parts, err := gguf.WriteSplit(f, prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// evalLogits opens path with cfg and returns the logits of every position of tokens.
func evalLogits(t *testing.T, path string, cfg engine.Config, tokens []int) []float32 {
	t.Helper()
	m, err := engine.Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer m.Close()
	var out []float32
	if err := m.NewSession(engine.SessionOptions{}).Eval(context.Background(), tokens, func(_ int, l []float32) {
		out = append(out, l...)
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSplitModelGivesTheSameLogits: every fixture variant split in three gives the very
// logits of the single file, read in place and through the resident RAM arena (whose fill
// takes each expert tensor from the part that holds it).
func TestSplitModelGivesTheSameLogits(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, files, prompts := qwenVariants(t)
	for name, path := range files {
		parts := splitInThree(t, path)
		if len(prompts[name]) == 0 {
			t.Fatalf("%s: the reference has no prompts", name)
		}
		tokens := prompts[name][0].Tokens
		for _, resident := range []bool{false, true} {
			cfg := engine.DefaultConfig()
			cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 128, false
			cfg.ResidentExperts = resident
			want := evalLogits(t, path, cfg, tokens)
			got := evalLogits(t, parts[0], cfg, tokens)
			if len(got) != len(want) || len(want) == 0 {
				t.Fatalf("%s: %d logits split, %d whole", name, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s resident=%v: logit %d is %v split, %v whole", name, resident, i, got[i], want[i])
				}
			}
		}
		whole, err := engine.Inspect(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		split, err := engine.Inspect(context.Background(), parts[0])
		if err != nil {
			t.Fatal(err)
		}
		if split.TotalParams != whole.TotalParams || split.ExpertBytes != whole.ExpertBytes || split.FileBytes <= whole.FileBytes-1024 {
			t.Errorf("%s: split %+v, whole %+v", name, split, whole)
		}
		// The plan of a split model is the plan of the whole.
		mc := engine.Machine{GPUFreeBytes: 0, HostAvailBytes: 16 << 30}
		pw, _, err := engine.PlanForMachine(context.Background(), path, engine.DefaultConfig(), mc)
		if err != nil {
			t.Fatal(err)
		}
		ps, _, err := engine.PlanForMachine(context.Background(), parts[0], engine.DefaultConfig(), mc)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(pw.Counts(), ps.Counts()) || pw.Context != ps.Context {
			t.Errorf("%s: plan of the split model %v (context %d), of the whole %v (context %d)", name, ps.Counts(), ps.Context, pw.Counts(), pw.Context)
		}
	}
}

// TestSplitModelPack: experts.bin packed from a split model is accepted for it and holds
// the same expert bytes as one packed from the single file.
func TestSplitModelPack(t *testing.T) {
	_, files, _ := qwenVariants(t)
	for name, path := range files {
		parts := splitInThree(t, path)
		var layouts []*experts.Layout
		for _, p := range []string{path, parts[0]} {
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			packed, err := experts.Pack(context.Background(), f, t.TempDir(), nil)
			if err != nil {
				if strings.Contains(err.Error(), "different types") { // a quantisation mix: refused whole and split
					continue
				}
				t.Fatalf("%s: %v", p, err)
			}
			l, err := experts.OpenPack(packed, f)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			defer l.Close()
			layouts = append(layouts, l)
		}
		if len(layouts) == 1 {
			t.Errorf("%s: packed only one of the whole and the split model", name)
		}
		if len(layouts) != 2 {
			continue
		}
		s := layouts[0].Shape
		if layouts[1].Shape != s {
			t.Fatalf("%s: shapes %+v and %+v", name, s, layouts[1].Shape)
		}
		for i := range s.Count() {
			id := experts.ID{Layer: i / s.Experts, Expert: i % s.Experts}
			g0, u0, d0 := layouts[0].Blob(id)
			g1, u1, d1 := layouts[1].Blob(id)
			if g0 == nil || string(g0) != string(g1) || string(u0) != string(u1) || string(d0) != string(d1) {
				t.Fatalf("%s: expert %s differs between the packs of the whole and the split model", name, id)
			}
		}
	}
}

// TestSplitModelRefusesABadSet: a missing part, or a part of another model, is refused
// by name, and so is a set opened by its second part.
func TestSplitModelRefusesABadSet(t *testing.T) {
	_, files, _ := qwenVariants(t)
	for name, path := range files {
		pa := splitInThree(t, path)
		info, err := engine.Inspect(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		// The foreign model has one layer more, so its parts carry another tensor count.
		spec, err := synth.Preset("tiny")
		if err != nil {
			t.Fatal(err)
		}
		spec.Layers, spec.Experts, spec.Pool = info.Layers+1, 4, 256
		other := filepath.Join(t.TempDir(), "other.gguf")
		if err := synth.Write(context.Background(), other, spec, nil); err != nil {
			t.Fatal(err)
		}
		pb := splitInThree(t, other)
		cfg := engine.DefaultConfig()
		cfg.Backend, cfg.Threads = "cpu", 1
		if err := os.Rename(pa[2], pa[2]+".away"); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Open(context.Background(), pa[0], cfg, nil); err == nil || !strings.Contains(err.Error(), pa[2]) || !strings.Contains(err.Error(), "missing") {
			t.Errorf("%s: missing part: %v", name, err)
		}
		data, err := os.ReadFile(pb[2])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pa[2], data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Open(context.Background(), pa[0], cfg, nil); err == nil || !strings.Contains(err.Error(), pa[2]) || !strings.Contains(err.Error(), "another model") {
			t.Errorf("%s: foreign part: %v", name, err)
		}
		if _, err := engine.Inspect(context.Background(), pa[1]); err == nil || !strings.Contains(err.Error(), "open the first part") {
			t.Errorf("%s: second part opened: %v", name, err)
		}
	}
}
