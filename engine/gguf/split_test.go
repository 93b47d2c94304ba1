package gguf

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/quant"
)

// writeSplitSource writes a single-file model of n F32 tensors with distinct bytes.
func writeSplitSource(t *testing.T, path string, n int) {
	t.Helper()
	w := NewWriter()
	w.AddString("general.architecture", "testarch")
	w.AddUint32("testarch.block_count", 3)
	for i := range n {
		data := bytes.Repeat([]byte{byte(i + 1)}, 4*(8+i*4))
		w.AddTensor(fmt.Sprintf("t%d.weight", i), quant.F32, []int64{int64(8 + i*4)}, func(out io.Writer) error {
			_, err := out.Write(data)
			return err
		})
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

func TestParseSplitPath(t *testing.T) {
	for _, c := range []struct {
		path   string
		prefix string
		i, n   int
		ok     bool
	}{
		{"/m/Qwen3-Q4_K_M-00001-of-00003.gguf", "/m/Qwen3-Q4_K_M", 0, 3, true},
		{"a-00003-of-00003.gguf", "a", 2, 3, true},
		{"a-00004-of-00003.gguf", "", 0, 0, false},
		{"a-00000-of-00003.gguf", "", 0, 0, false},
		{"a-0001-of-00003.gguf", "", 0, 0, false},
		{"a-+0001-of-00003.gguf", "", 0, 0, false},
		{"model.gguf", "", 0, 0, false},
		{"-00001-of-00002.gguf", "", 0, 0, false},
	} {
		prefix, i, n, ok := ParseSplitPath(c.path)
		if prefix != c.prefix || i != c.i || n != c.n || ok != c.ok {
			t.Errorf("ParseSplitPath(%q) = %q %d %d %v, want %q %d %d %v", c.path, prefix, i, n, ok, c.prefix, c.i, c.n, c.ok)
		}
		if c.ok && SplitPath(prefix, i, n) != c.path {
			t.Errorf("SplitPath(%q, %d, %d) = %q, want %q", prefix, i, n, SplitPath(prefix, i, n), c.path)
		}
	}
}

// TestSplitRoundTrip splits a file in three and opens the set, mapped and unmapped, as one
// file with the same metadata and tensor bytes.
func TestSplitRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "whole.gguf")
	writeSplitSource(t, src, 7)
	whole, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	paths, err := WriteSplit(whole, filepath.Join(dir, "m"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || filepath.Base(paths[2]) != "m-00003-of-00003.gguf" {
		t.Fatalf("parts %v", paths)
	}
	for _, open := range []func(string) (*File, error){Open, OpenUnmapped} {
		f, err := open(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		if f.PartCount() != 3 {
			t.Errorf("%d parts, want 3", f.PartCount())
		}
		if err := f.Map(); err != nil {
			t.Fatal(err)
		}
		if f.Architecture() != "testarch" {
			t.Errorf("architecture %q", f.Architecture())
		}
		if len(f.Tensors) != len(whole.Tensors) {
			t.Fatalf("%d tensors, want %d", len(f.Tensors), len(whole.Tensors))
		}
		parts := map[int]bool{}
		var total int64
		for i, wt := range whole.Tensors {
			got, ok := f.Tensor(wt.Name)
			if !ok || f.Tensors[i].Name != wt.Name {
				t.Fatalf("tensor %q missing or out of order", wt.Name)
			}
			parts[got.Part] = true
			if !bytes.Equal(f.TensorData(got), whole.TensorData(wt)) {
				t.Errorf("tensor %q: bytes differ", wt.Name)
			}
		}
		for i := range f.PartCount() {
			total += f.Part(i).Size()
		}
		if len(parts) != 3 || f.TotalSize() != total {
			t.Errorf("tensors in parts %v, total size %d of %d", parts, f.TotalSize(), total)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSplitRefusesBadSets(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "whole.gguf")
	writeSplitSource(t, src, 6)
	whole, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	paths, err := WriteSplit(whole, filepath.Join(dir, "m"), 3)
	if err != nil {
		t.Fatal(err)
	}
	// Another model's set, to take a part from.
	other := filepath.Join(dir, "other.gguf")
	writeSplitSource(t, other, 4)
	of, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	otherParts, err := WriteSplit(of, filepath.Join(dir, "o"), 3)
	if err != nil {
		t.Fatal(err)
	}

	expectErr := func(what string, wants ...string) {
		t.Helper()
		for _, open := range []func(string) (*File, error){Open, OpenUnmapped} {
			f, err := open(paths[0])
			if err == nil {
				f.Close()
				t.Fatalf("%s: opened", what)
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not say %q", what, err, w)
				}
			}
		}
	}

	if _, err := Open(paths[1]); err == nil || !strings.Contains(err.Error(), "open the first part, m-00001-of-00003.gguf") {
		t.Errorf("second part opened alone: %v", err)
	}

	move := func(from, to string) {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	move(paths[1], paths[1]+".away")
	expectErr("missing part", "part 2 of 3", paths[1], "missing")
	move(paths[1]+".away", paths[1])

	// A part of another set with the right number: the tensor count gives it away.
	move(paths[2], paths[2]+".away")
	b, err := os.ReadFile(otherParts[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[2], b, 0o644); err != nil {
		t.Fatal(err)
	}
	expectErr("part of another model", paths[2], "says its model has 4 tensors, the first part 6", "another model")

	// The first part in the place of the third.
	b, err = os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[2], b, 0o644); err != nil {
		t.Fatal(err)
	}
	expectErr("part in the wrong place", paths[2], "it says it is part 1 of 3")
	move(paths[2]+".away", paths[2])

	// A first part whose name was changed.
	renamed := filepath.Join(dir, "renamed.gguf")
	b, err = os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(renamed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(renamed); err == nil || !strings.Contains(err.Error(), "-00001-of-00003.gguf") {
		t.Errorf("renamed first part: %v", err)
	}
	f, err := Open(paths[0])
	if err != nil {
		t.Fatalf("restored set: %v", err)
	}
	f.Close()
}
