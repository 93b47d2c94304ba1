package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
)

func packCLI(args ...string) (stdout, stderr string, err error) {
	var out, errBuf bytes.Buffer
	err = runPack(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &errBuf})
	return out.String(), errBuf.String(), err
}

func TestPackFixture(t *testing.T) {
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	for _, v := range ref.All() {
		packFixture(t, ref.Path(v), ref.Model(t, v).Config)
	}
}

// packFixture packs one fixture model and checks the output against its reference.json
// shape and the model's own bytes.
func packFixture(t *testing.T, model string, c fixtures.ModelConfig) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out") // created by the command
	stdout, stderr, err := packCLI("-m", model, "-o", dir)
	if err != nil {
		t.Fatalf("pack %s: %v\n%s", model, err, stderr)
	}
	path := filepath.Join(dir, experts.PackFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	blobs := fmt.Sprintf("%d blobs (%d layers x %d experts", c.Layers*c.ExpertCount(), c.Layers, c.ExpertCount())
	for _, want := range []string{path, fmt.Sprintf("(%d bytes)", st.Size()), blobs} {
		if !strings.Contains(stdout, want) {
			t.Errorf("%s: stdout %q lacks %q", model, stdout, want)
		}
	}
	if !strings.Contains(stderr, "100%") || !strings.Contains(stderr, "only from the model's folder") {
		t.Errorf("%s: stderr %q lacks the progress or the note about the folder", model, stderr)
	}
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := experts.OpenPack(path, f)
	if err != nil {
		t.Fatalf("%s: the written pack does not open: %v", model, err)
	}
	defer l.Close()
	src, _ := experts.GGUFLayout(f)
	for _, id := range []experts.ID{{Layer: 0, Expert: 0}, {Layer: c.Layers - 1, Expert: c.ExpertCount() - 1}} {
		g, u, d := l.Blob(id)
		wg, wu, wd := src.Blob(id)
		if !bytes.Equal(g, wg) || !bytes.Equal(u, wu) || !bytes.Equal(d, wd) {
			t.Errorf("%s: %s: packed bytes differ from the model's", model, id)
		}
	}
}

// TestPackNextToModel: packed into the model's own folder, the engine finds it.
func TestPackNextToModel(t *testing.T) {
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	raw, err := os.ReadFile(ref.Path(ref.All()[0]))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := packCLI("-m", model, "-o", dir)
	if err != nil || strings.Contains(stderr, "only from the model's folder") {
		t.Fatalf("pack: %v\n%s", err, stderr)
	}
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, ok := experts.FindPack(f)
	if !ok {
		t.Fatal("the engine does not find experts.bin next to the model")
	}
	l.Close()
}

func TestPackErrors(t *testing.T) {
	dir := t.TempDir()
	notModel := filepath.Join(dir, "x.gguf")
	if err := os.WriteFile(notModel, []byte("not a gguf"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"-o", dir}, true, "-m MODEL is required"},
		{[]string{"-m", notModel}, true, "-o DIR is required"},
		{[]string{"-m", notModel, "-o", dir, "extra"}, true, "unexpected argument"},
		{[]string{"-m", filepath.Join(dir, "missing.gguf"), "-o", dir}, false, "missing.gguf"},
		{[]string{"-m", notModel, "-o", dir}, false, notModel},
	} {
		_, _, err := packCLI(c.args...)
		if err == nil || errors.Is(err, errUsage) != c.usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want usage=%v saying %q", c.args, err, c.usage, c.want)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "experts.bin*")); len(names) > 0 {
		t.Errorf("failed packs left %v", names)
	}
}
