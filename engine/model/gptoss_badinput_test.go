package model_test

import (
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
)

// rewrite copies the GGUF at src to a temporary file, with each metadata pair passed through
// key (nil drops it) and each tensor through tensor (false drops it; it may change the
// shape, and the data is cut or zero-padded to fit).
func rewrite(t *testing.T, src string, key func(gguf.KV) *gguf.KV, tensor func(*gguf.TensorInfo) bool) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if kv.Key == "general.alignment" {
			continue
		}
		if out := key(kv); out != nil {
			w.Add(out.Key, out.Value)
		}
	}
	for _, ti := range f.Tensors {
		data := f.TensorData(ti)
		nt := ti
		nt.Ne = append([]int64(nil), ti.Ne...)
		if !tensor(&nt) {
			continue
		}
		rb, err := quant.RowBytes(nt.Type, int(nt.Ne[0]))
		if err != nil {
			t.Fatal(err)
		}
		want := rb * int(nt.Rows())
		if err := w.AddTensor(nt.Name, nt.Type, nt.Ne, func(out io.Writer) error {
			buf := make([]byte, want)
			copy(buf, data)
			_, err := out.Write(buf)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGptOssBadInput: a gpt-oss file missing a tensor, with a wrong sink count, an unknown
// rope type or a missing YaRN key gives an error naming the tensor or key, and no panic.
func TestGptOssBadInput(t *testing.T) {
	dir := fixtures.Path(t, "gptoss-tiny")
	ref := loadReference(t, dir)
	names := slices.Sorted(maps.Keys(ref.Variants))
	keep := func(kv gguf.KV) *gguf.KV { return &kv }
	all := func(*gguf.TensorInfo) bool { return true }
	cases := []struct {
		name, want string
		key        func(gguf.KV) *gguf.KV
		tensor     func(*gguf.TensorInfo) bool
	}{
		{"missing tensor", "blk.1.attn_sinks.weight", keep, func(ti *gguf.TensorInfo) bool { return ti.Name != "blk.1.attn_sinks.weight" }},
		{"missing expert bias", "blk.0.ffn_down_exps.bias", keep, func(ti *gguf.TensorInfo) bool { return ti.Name != "blk.0.ffn_down_exps.bias" }},
		{"wrong sink count", "blk.0.attn_sinks.weight", keep, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.attn_sinks.weight" {
				ti.Ne[0]--
			}
			return true
		}},
		{"unknown rope type", "rope.scaling.type", func(kv gguf.KV) *gguf.KV {
			if strings.HasSuffix(kv.Key, ".rope.scaling.type") {
				kv.Value = gguf.NewString("longrope")
			}
			return &kv
		}, all},
		{"missing yarn factor", "rope.scaling.factor", func(kv gguf.KV) *gguf.KV {
			if strings.HasSuffix(kv.Key, ".rope.scaling.factor") {
				return nil
			}
			return &kv
		}, all},
	}
	for _, variant := range names {
		for _, c := range cases {
			t.Run(variant+"/"+c.name, func(t *testing.T) {
				testBadGptOss(t, filepath.Join(dir, ref.Variants[variant].File), c.want, c.key, c.tensor)
			})
		}
	}
}

// testBadGptOss loads src rewritten by key and tensor and expects an error naming want.
func testBadGptOss(t *testing.T, src, want string, key func(gguf.KV) *gguf.KV, tensor func(*gguf.TensorInfo) bool) {
	t.Helper()
	f, err := gguf.Open(rewrite(t, src, key, tensor))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := cpu.New(cpu.Options{Threads: 1})
	defer b.Close()
	if _, err = model.Load(f, b, nil); err == nil {
		t.Fatal("the file loaded")
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}
