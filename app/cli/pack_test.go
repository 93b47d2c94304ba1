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
	model := fixtures.Path(t, "qwen3moe-tiny", "model-q4_k.gguf")
	dir := filepath.Join(t.TempDir(), "out") // created by the command
	stdout, stderr, err := packCLI("-m", model, "-o", dir)
	if err != nil {
		t.Fatalf("pack: %v\n%s", err, stderr)
	}
	path := filepath.Join(dir, experts.PackFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// tiny256: 2 layers of 8 experts.
	for _, want := range []string{path, fmt.Sprintf("(%d bytes)", st.Size()), "16 blobs (2 layers x 8 experts"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout %q lacks %q", stdout, want)
		}
	}
	if !strings.Contains(stderr, "100%") || !strings.Contains(stderr, "only from the model's folder") {
		t.Errorf("stderr %q lacks the progress or the note about the folder", stderr)
	}
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := experts.OpenPack(path, f)
	if err != nil {
		t.Fatalf("the written pack does not open: %v", err)
	}
	defer l.Close()
	src, _ := experts.GGUFLayout(f)
	for _, id := range []experts.ID{{Layer: 0, Expert: 0}, {Layer: 1, Expert: 7}} {
		g, u, d := l.Blob(id)
		wg, wu, wd := src.Blob(id)
		if !bytes.Equal(g, wg) || !bytes.Equal(u, wu) || !bytes.Equal(d, wd) {
			t.Errorf("%s: packed bytes differ from the model's", id)
		}
	}
}

// TestPackNextToModel: packed into the model's own folder, the engine finds it.
func TestPackNextToModel(t *testing.T) {
	raw, err := os.ReadFile(fixtures.Path(t, "qwen3moe-tiny", "model-q8_0.gguf"))
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
