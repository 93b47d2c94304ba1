package gguf

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"strata/engine/quant"
)

// BenchmarkOpen opens a file with a Qwen-sized vocabulary (151936 tokens) and 579 tensor
// infos, the header of a 30B MoE model, with little data behind it: mapped, and with
// ordinary reads (OpenUnmapped) from the default first read and from a small one that
// has to grow several times.
func BenchmarkOpen(b *testing.B) {
	path := qwenSizedHeader(b)
	for _, c := range []struct {
		name string
		open func(string) (*File, error)
	}{
		{"mapped", Open},
		{"unmapped", OpenUnmapped},
		{"unmapped-from-64KiB", func(p string) (*File, error) { return openUnmapped(p, 64<<10) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := c.open(path)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// qwenSizedHeader writes the benchmark's file and returns its path.
func qwenSizedHeader(b *testing.B) string {
	b.Helper()
	w := NewWriter()
	w.AddString("general.architecture", "qwen3moe")
	toks := make([]string, 151936)
	types := make([]int32, len(toks))
	for i := range toks {
		toks[i] = fmt.Sprintf("tok%d", i)
		types[i] = 1
	}
	w.AddStrings("tokenizer.ggml.tokens", toks)
	w.AddInt32s("tokenizer.ggml.token_type", types)
	for i := range 579 {
		err := w.AddTensor(fmt.Sprintf("blk.%d.t", i), quant.Q4_K, []int64{256, 2}, func(out io.Writer) error {
			_, err := out.Write(make([]byte, 288))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(b.TempDir(), "h.gguf")
	if err := w.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	return path
}
