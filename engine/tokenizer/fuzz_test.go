package tokenizer

import (
	"path/filepath"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"strata/engine/fixtures"
)

// FuzzEncodeDecode encodes arbitrary bytes with every reference tokenizer (when the fixtures
// are there) and a small hand-made one, with and without special tokens: it must never
// panic, every id must be in the vocabulary, and valid UTF-8 must decode back to itself
// (after the tokenizer's normaliser: NFC for qwen3).
func FuzzEncodeDecode(f *testing.F) {
	tks := map[string]*Tokenizer{}
	small, err := FromGGUF(mapMeta{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
		"tokenizer.ggml.tokens": []string{"a", "b", "ab"}, "tokenizer.ggml.token_type": []int64{1, 1, 1},
		"tokenizer.ggml.merges": []string{"a b"},
	})
	if err != nil {
		f.Fatal(err)
	}
	tks["small"] = small
	if dir, err := fixtures.Lookup(); err == nil {
		for _, name := range []string{"qwen3", "gptoss", "deepseek_v3", "llama3_1"} {
			tk, err := LoadFile(filepath.Join(dir, "tokenizers", name, "tokenizer.json.gz"))
			if err != nil {
				f.Fatalf("%s: %v", name, err)
			}
			tks[name] = tk
		}
	}
	for _, s := range []string{"", "Hello, world!", "<|im_end|><|endoftext|>", "\xff\xfe\x00", "e\u0301 \u212b", "   \n\n\t 123456 ", "😀👍🏽", "abba"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, tk := range tks {
			for _, special := range []bool{false, true} {
				ids := tk.Encode(s, special)
				for _, id := range ids {
					if id < 0 || id >= tk.VocabSize() {
						t.Fatalf("%s: Encode(%q) gave id %d outside the vocabulary of %d", name, s, id, tk.VocabSize())
					}
				}
				got := tk.Decode(ids)
				if name == "small" || !utf8.ValidString(s) {
					continue // the small vocabulary lacks most bytes; invalid UTF-8 has no round trip
				}
				want := s
				if name == "qwen3" {
					want = norm.NFC.String(s)
				}
				if got != want {
					t.Errorf("%s special=%v: Decode(Encode(%q)) = %q", name, special, s, got)
				}
			}
		}
	})
}
