package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/gguf"
)

// mapMeta is an in-memory GGUF key-value store.
type mapMeta map[string]any

func (m mapMeta) get(key string) (any, error) {
	v, ok := m[key]
	if !ok {
		return nil, fmt.Errorf("metadata key %q is missing", key)
	}
	return v, nil
}

func getAs[T any](m mapMeta, key string) (T, error) {
	var zero T
	v, err := m.get(key)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("metadata key %q has type %T", key, v)
	}
	return t, nil
}

func (m mapMeta) GetString(key string) (string, error)    { return getAs[string](m, key) }
func (m mapMeta) GetStrings(key string) ([]string, error) { return getAs[[]string](m, key) }
func (m mapMeta) GetInts(key string) ([]int64, error)     { return getAs[[]int64](m, key) }
func (m mapMeta) GetUint(key string) (uint64, error)      { return getAs[uint64](m, key) }
func (m mapMeta) GetBool(key string) (bool, error)        { return getAs[bool](m, key) }

// looksSpecial is llama.cpp's converter rule (does_token_look_special).
func looksSpecial(s string) bool {
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		s == "<pad>" || s == "<mask>" || s == "<2mass>" || s == "[@BOS@]" ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// ggufFromHF builds the metadata llama.cpp's convert_hf_to_gguf.py would write for a
// tokenizer.json: the tokens by id, NORMAL for the BPE vocabulary, CONTROL for added tokens
// that are special or look special, USER_DEFINED for the other added tokens; merges as
// "left right". It returns the metadata and the added tokens that HF calls non-special but
// GGUF marks CONTROL.
func ggufFromHF(t testing.TB, name, pre string) (mapMeta, []string) {
	t.Helper()
	f, err := os.Open(fixtures.Path(t, "tokenizers", name, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Added []hfAdded `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	n := len(doc.Model.Vocab)
	for _, a := range doc.Added {
		n = max(n, a.ID+1)
	}
	tokens := make([]string, n)
	types := make([]int64, n)
	for s, id := range doc.Model.Vocab {
		tokens[id], types[id] = s, tokNormal
	}
	var controlled []string
	for _, a := range doc.Added {
		tokens[a.ID] = a.Content
		if a.Special || looksSpecial(a.Content) {
			types[a.ID] = tokControl
			if !a.Special {
				controlled = append(controlled, a.Content)
			}
		} else {
			types[a.ID] = tokUserDefined
		}
	}
	var merges []string
	var pairs [][2]string
	if json.Unmarshal(doc.Model.Merges, &pairs) == nil {
		for _, p := range pairs {
			merges = append(merges, p[0]+" "+p[1])
		}
	} else if err := json.Unmarshal(doc.Model.Merges, &merges); err != nil {
		t.Fatal(err)
	}
	return mapMeta{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        pre,
		"tokenizer.ggml.tokens":     tokens,
		"tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges":     merges,
		"tokenizer.ggml.eos_token_id": uint64(func() int {
			for _, a := range doc.Added {
				if a.Content == "<|im_end|>" || a.Content == "<|return|>" || a.Content == "<|eot_id|>" || a.Content == "<｜end▁of▁sentence｜>" {
					return a.ID
				}
			}
			return 0
		}()),
	}, controlled
}

// TestGGUFMatchesHF builds each reference vocabulary the way a GGUF file stores it and
// checks it against every fixture row. The only differences allowed are the documented
// ones: with parseSpecial=false, a text holding an added token that HF calls non-special
// but GGUF marks CONTROL.
func TestGGUFMatchesHF(t *testing.T) {
	cases := readCases(t)
	pres := map[string]string{"qwen3": "qwen2", "gptoss": "gpt-4o", "deepseek_v3": "deepseek-v3", "llama3_1": "llama-bpe"}
	for _, name := range tokenizerNames {
		t.Run(name, func(t *testing.T) {
			md, controlled := ggufFromHF(t, name, pres[name])
			tk, err := FromGGUF(md)
			if err != nil {
				t.Fatal(err)
			}
			rows, excused := 0, 0
			for _, c := range cases {
				if c.Tokenizer != name {
					continue
				}
				rows++
				if got := tk.Encode(c.Text, true); !slices.Equal(got, c.IDsSpecial) && len(got)+len(c.IDsSpecial) > 0 {
					t.Errorf("%s: Encode(%q, true) = %v, want %v", c.ID, c.Text, got, c.IDsSpecial)
				}
				if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDs) && len(got)+len(c.IDs) > 0 {
					if slices.ContainsFunc(c.ContainsAdded, func(s string) bool { return slices.Contains(controlled, s) }) {
						excused++
					} else {
						t.Errorf("%s: Encode(%q, false) = %v, want %v", c.ID, c.Text, got, c.IDs)
					}
				}
				if got := tk.Decode(c.IDs); got != c.Decoded {
					t.Errorf("%s: Decode = %q, want %q", c.ID, got, c.Decoded)
				}
			}
			t.Logf("%d rows; %d differ only by a CONTROL-marked non-special token (%d such tokens)", rows, excused, len(controlled))
		})
	}
}

// TestGGUFFixtureFiles loads the dummy vocabulary of every fixture model file and checks it
// against what reference.json says of it.
func TestGGUFFixtureFiles(t *testing.T) {
	for _, folder := range []string{"qwen3moe-tiny", "gptoss-tiny", "qwen35moe-tiny"} {
		ref := fixtures.LoadReference(t, folder)
		for _, v := range ref.All() {
			m := ref.Model(t, v)
			path := ref.Path(v)
			n, lastText := m.DummyVocab(t)
			pre, eos := m.MetaString(t, "tokenizer.ggml.pre"), m.Meta(t, "tokenizer.ggml.eos_token_id")
			addBOS := m.Metadata["tokenizer.ggml.add_bos_token"] == true
			if n != m.Config.Vocab {
				t.Errorf("%s: reference.json: %d tokens described, vocab_size %d", path, n, m.Config.Vocab)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := FromGGUF(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if tk.VocabSize() != n || tk.PreTokenizer() != pre {
				t.Errorf("%s: vocab %d pre %s, want %d %s", path, tk.VocabSize(), tk.PreTokenizer(), n, pre)
			}
			last := n - 1
			if got := tk.TokenText(last); got != lastText {
				t.Errorf("%s: token %d = %q, want %q", path, last, got, lastText)
			}
			if got := tk.Encode(lastText, true); !slices.Equal(got, []int{last}) {
				t.Errorf("%s: Encode(%s, special) = %v", path, lastText, got)
			}
			if !tk.IsEndOfGeneration(eos) || tk.IsEndOfGeneration(0) {
				t.Errorf("%s: end of generation wrong", path)
			}
			if got, ok := tk.EOS(); !ok || got != eos || tk.AddBOS() != addBOS {
				t.Errorf("%s: eos %d %v addBOS %v, want %d %v", path, got, ok, tk.AddBOS(), eos, addBOS)
			}
			if got := tk.Decode([]int{0, 1, 2}); got != "<t0><t1><t2>" {
				t.Errorf("%s: Decode = %q", path, got)
			}
		}
	}
}

func TestGGUFErrors(t *testing.T) {
	base := func() mapMeta {
		return mapMeta{
			"tokenizer.ggml.model":      "gpt2",
			"tokenizer.ggml.pre":        "qwen2",
			"tokenizer.ggml.tokens":     []string{"a", "b", "ab"},
			"tokenizer.ggml.token_type": []int64{1, 1, 1},
			"tokenizer.ggml.merges":     []string{"a b"},
		}
	}
	if tk, err := FromGGUF(base()); err != nil {
		t.Fatal(err)
	} else if got := tk.Encode("abba", false); !slices.Equal(got, []int{2, 1, 0}) {
		t.Errorf("Encode(abba) = %v, want [2 1 0]", got)
	}
	for name, edit := range map[string]func(m mapMeta){
		"llama model":   func(m mapMeta) { m["tokenizer.ggml.model"] = "llama" },
		"unknown pre":   func(m mapMeta) { m["tokenizer.ggml.pre"] = "klingon" },
		"no tokens":     func(m mapMeta) { delete(m, "tokenizer.ggml.tokens") },
		"empty tokens":  func(m mapMeta) { m["tokenizer.ggml.tokens"] = []string{} },
		"types length":  func(m mapMeta) { m["tokenizer.ggml.token_type"] = []int64{1} },
		"bad type":      func(m mapMeta) { m["tokenizer.ggml.token_type"] = []int64{1, 9, 1} },
		"bad merge":     func(m mapMeta) { m["tokenizer.ggml.merges"] = []string{"ab"} },
		"no merges key": func(m mapMeta) { delete(m, "tokenizer.ggml.merges") },
	} {
		m := base()
		edit(m)
		if _, err := FromGGUF(m); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
