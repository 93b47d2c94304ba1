package tokenizer

import (
	"bytes"
	"compress/gzip"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"strata/engine/fixtures"
)

var allPre = []preKind{preGPT2, preQwen2, preQwen35, preLlama3, preO200k, preDeepSeek3}

// FuzzPretokenize checks every pre-tokenizer on any input, valid UTF-8 or not: no empty
// piece, and the pieces put back together are the input.
func FuzzPretokenize(f *testing.F) {
	for _, s := range []string{"", "Hello world", "  \n\n  x", "it'ſ 'LL", "١٢٣ ½ Ⅻ", "日本語テキスト123abc",
		"\xff\xfe\x80 a", "a\u0301\u0301", "\u3000\u2028\u0085\v", "HELLOworld's", "//path/to\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, k := range allPre {
			var sb strings.Builder
			k.split(s, func(p string) {
				if p == "" {
					t.Fatalf("%s: empty piece in %q", k, s)
				}
				sb.WriteString(p)
			})
			if sb.String() != s {
				t.Fatalf("%s: pieces of %q rebuild %q", k, s, sb.String())
			}
		}
	})
}

// byteVocab is a GGUF-style vocabulary of the 256 bytes plus a few merges and added tokens.
func byteVocab(t testing.TB) *Tokenizer {
	bl := newByteLevel()
	var tokens []string
	var types []int64
	for i := 0; i < 256; i++ {
		tokens = append(tokens, bl.encode([]byte{byte(i)}))
		types = append(types, tokNormal)
	}
	tokens = append(tokens, "he", "ll", "hell", "hello", "<|eot|>", "<think>")
	types = append(types, tokNormal, tokNormal, tokNormal, tokNormal, tokControl, tokUserDefined)
	tk, err := FromGGUF(mapMeta{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
		"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges": []string{"h e", "l l", "he ll", "hell o"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// FuzzEncodeRoundTrip: with every byte in the vocabulary, decoding the encoding gives back
// the (NFC-normalised) text, and special-token parsing only ever yields known ids.
func FuzzEncodeRoundTrip(f *testing.F) {
	for _, s := range []string{"hello", "hello<|eot|><think>", "héllo wörld\n\n", "\x00\x01", "😀👍🏽", "<|eot"} {
		f.Add(s)
	}
	tk := byteVocab(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		want := norm.NFC.String(s)
		for _, special := range []bool{false, true} {
			ids := tk.Encode(s, special)
			for _, id := range ids {
				if id < 0 || id >= tk.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d", s, id)
				}
			}
			if got := tk.Decode(ids); got != want && !(special && strings.Contains(s, "<|eot|>")) {
				t.Fatalf("Decode(Encode(%q, %v)) = %q", s, special, got)
			}
		}
	})
}

func TestByteVocab(t *testing.T) {
	tk := byteVocab(t)
	eot, think := 260, 261
	for _, tc := range []struct {
		text    string
		special bool
		want    []int
	}{
		{"hello", false, []int{259}},
		{"<think>hello", false, []int{think, 259}}, // USER_DEFINED: always matched
		{"hello<|eot|>", true, []int{259, eot}},    // CONTROL: matched with parseSpecial
	} {
		if got := tk.Encode(tc.text, tc.special); !equalInts(got, tc.want) {
			t.Errorf("Encode(%q, %v) = %v, want %v", tc.text, tc.special, got, tc.want)
		}
	}
	if got := tk.Encode("hello<|eot|>", false); len(got) < 3 || got[0] != 259 || got[1] == eot {
		t.Errorf("CONTROL token matched without parseSpecial: %v", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHFJSONErrors feeds broken and unsupported tokenizer.json files: each must fail with
// an error, never a panic.
func TestHFJSONErrors(t *testing.T) {
	good := `{"added_tokens":[{"id":3,"content":"<s>","special":true}],"normalizer":null,
"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`
	tk, err := FromHFJSON(strings.NewReader(good))
	if err != nil {
		t.Fatalf("minimal tokenizer.json: %v", err)
	}
	if got := tk.Encode("ab<s>", true); !equalInts(got, []int{2, 3}) {
		t.Errorf("Encode = %v, want [2 3]", got)
	}
	for i := 0; i < len(good); i += 7 { // every truncation
		if _, err := FromHFJSON(strings.NewReader(good[:i])); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
	for name, doc := range map[string]string{
		"not json":       `hello`,
		"unigram":        strings.Replace(good, `"BPE"`, `"Unigram"`, 1),
		"bad regex":      strings.Replace(good, `{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}`, `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]}`, 1),
		"no byte level":  strings.Replace(good, `"ByteLevel"`, `"Whitespace"`, 1),
		"prefix space":   strings.Replace(good, `"add_prefix_space":false`, `"add_prefix_space":true`, 1),
		"normalizer":     strings.Replace(good, `"normalizer":null`, `"normalizer":{"type":"Lowercase"}`, 1),
		"bad merge":      strings.Replace(good, `["a b"]`, `["ab"]`, 1),
		"merge triple":   strings.Replace(good, `["a b"]`, `[["a","b","c"]]`, 1),
		"vocab not int":  strings.Replace(good, `"a":0`, `"a":"zero"`, 1),
		"negative id":    strings.Replace(good, `"a":0`, `"a":-4`, 1),
		"lstrip":         strings.Replace(good, `"special":true`, `"special":true,"lstrip":true`, 1),
		"byte fallback":  strings.Replace(good, `"type":"BPE"`, `"type":"BPE","byte_fallback":true`, 1),
		"bad escape":     strings.Replace(good, `"ab":2`, `"a\qb":2`, 1),
		"no vocab":       strings.Replace(good, `"vocab":{"a":0,"b":1,"ab":2},`, ``, 1),
		"added not list": strings.Replace(good, `[{"id":3,"content":"<s>","special":true}]`, `{}`, 1),
	} {
		if _, err := FromHFJSON(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(good))
	zw.Close()
	if _, err := FromHFJSON(bytes.NewReader(gz.Bytes())); err != nil {
		t.Errorf("gzipped: %v", err)
	}
	if _, err := FromHFJSON(bytes.NewReader(gz.Bytes()[:gz.Len()/2])); err == nil {
		t.Error("truncated gzip: no error")
	}
}

// TestJSONEscapes checks the JSON reader's escapes, surrogate pairs included.
func TestJSONEscapes(t *testing.T) {
	s := &jscan{b: []byte(`"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x"`)}
	got, err := s.str()
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\"\\/\b\f\n\r\té😀\uFFFDx"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestLoadFileMissing: a missing file is an error naming it.
func TestLoadFileMissing(t *testing.T) {
	path := fixtures.Path(t, "tokenizers", "nope", "tokenizer.json")
	if _, err := os.Stat(path); err == nil {
		t.Skip("unexpected file")
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("err = %v", err)
	}
}

// TestMergeLongMatchesMerge: the heap-based BPE for long words gives the same ids as the
// plain one on every fixture pre-token, and a 1 MB word encodes in reasonable time.
func TestMergeLongMatchesMerge(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3_1"} {
		tk := testSet().get(t, name)
		checked := 0
		for _, c := range readCases(t) {
			if c.Tokenizer != name {
				continue
			}
			for _, p := range c.Pretokens {
				want := tk.model.merge(p)
				if got := tk.model.mergeLong(p); !slices.Equal(got, want) {
					t.Errorf("%s %s: mergeLong(%q) = %v, merge = %v", name, c.ID, p, got, want)
				}
				checked++
			}
		}
		if checked < 1000 {
			t.Errorf("%s: only %d pre-tokens checked", name, checked)
		}
	}
	tk := testSet().get(t, "qwen3")
	long := strings.Repeat("abcdefghij", 100_000)
	ids := tk.Encode(long, false)
	if got := tk.Decode(ids); got != long {
		t.Errorf("1 MB word does not round-trip (%d ids)", len(ids))
	}
}
