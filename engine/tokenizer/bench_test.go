package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/fixtures"
)

// BenchmarkLoadQwen3 measures loading the 151k-token Qwen3 vocabulary from tokenizer.json.gz
// (gunzip + JSON + building the maps). Goal: under 100 ms.
func BenchmarkLoadQwen3(b *testing.B) {
	path := fixtures.Path(b, "tokenizers", "qwen3", "tokenizer.json.gz")
	for b.Loop() {
		if _, err := LoadFile(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadQwen3Plain is the same from an uncompressed tokenizer.json (what a model
// folder ships), so the gunzip cost is left out.
func BenchmarkLoadQwen3Plain(b *testing.B) {
	gz, err := os.ReadFile(fixtures.Path(b, "tokenizers", "qwen3", "tokenizer.json.gz"))
	if err != nil {
		b.Fatal(err)
	}
	data, err := gunzipIfNeeded(gz)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := LoadFile(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromGGUFQwen3 builds the Qwen3 tokenizer from GGUF-style metadata already in
// memory (what the engine does after gguf.Open).
func BenchmarkFromGGUFQwen3(b *testing.B) {
	md, _ := ggufFromHF(b, "qwen3", "qwen2")
	b.ResetTimer()
	for b.Loop() {
		if _, err := FromGGUF(md); err != nil {
			b.Fatal(err)
		}
	}
}

// mixedText builds about n bytes from the fixture strings (prose, code, CJK, emoji, ...).
func mixedText(b *testing.B, n int) string {
	f, err := os.Open(fixtures.Path(b, "tokenizers", "cases.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var parts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var c struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			b.Fatal(err)
		}
		parts = append(parts, c.Text)
	}
	one := strings.Join(parts, "\n")
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(one)
		sb.WriteString("\n")
	}
	return sb.String()
}

// BenchmarkEncodeQwen3 tokenises 10 MB of mixed text with the Qwen3 vocabulary on one
// goroutine; the MB/s column is the throughput (goal: at least 10 MB/s).
func BenchmarkEncodeQwen3(b *testing.B) {
	benchEncode(b, "qwen3")
}

func BenchmarkEncodeGPTOSS(b *testing.B) {
	benchEncode(b, "gptoss")
}

func benchEncode(b *testing.B, name string) {
	tk, err := LoadFile(fixtures.Path(b, "tokenizers", name, "tokenizer.json.gz"))
	if err != nil {
		b.Fatal(err)
	}
	text := mixedText(b, 10<<20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.Encode(text, false)
	}
}
