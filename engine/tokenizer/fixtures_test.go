package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"

	"strata/engine/fixtures"
)

// tokCase is one row of tokenizers/encodings.jsonl (HF tokenizers' reference output).
type tokCase struct {
	Tokenizer      string   `json:"tokenizer"`
	ID             string   `json:"id"`
	Text           string   `json:"text"`
	IDs            []int    `json:"ids"`
	IDsSpecial     []int    `json:"ids_special"`
	Decoded        string   `json:"decoded"`
	DecodedSpecial string   `json:"decoded_special"`
	ContainsAdded  []string `json:"contains_added"`
	Normalized     string   `json:"normalized"`
	Pretokens      []string `json:"pretokens"`
}

var tokenizerNames = []string{"qwen3", "gptoss", "deepseek_v3", "llama3_1"}

func readCases(t testing.TB) []tokCase {
	t.Helper()
	f, err := os.Open(fixtures.Path(t, "tokenizers", "encodings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	var out []tokCase
	for sc.Scan() {
		var c tokCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("encodings.jsonl line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// loaded caches the four reference tokenizers across tests (loading gpt-oss takes a while).
type loadedSet struct {
	mu sync.Mutex
	m  map[string]*Tokenizer
}

func (l *loadedSet) get(t testing.TB, name string) *Tokenizer {
	t.Helper()
	path := fixtures.Path(t, "tokenizers", name, "tokenizer.json.gz")
	l.mu.Lock()
	defer l.mu.Unlock()
	if tk, ok := l.m[name]; ok {
		return tk
	}
	tk, err := LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile(%s): %v", path, err)
	}
	if l.m == nil {
		l.m = map[string]*Tokenizer{}
	}
	l.m[name] = tk
	return tk
}

// testSet is shared by the tests of this package; it only caches immutable tokenizers.
func testSet() *loadedSet { return sharedSet }

var sharedSet = &loadedSet{}

func TestFixturePretokens(t *testing.T) {
	cases := readCases(t)
	bad := 0
	for _, c := range cases {
		tk := testSet().get(t, c.Tokenizer)
		got := tk.Pretokenize(c.Text)
		if !slices.Equal(got, c.Pretokens) && !(len(got) == 0 && len(c.Pretokens) == 0) {
			bad++
			if bad <= 10 {
				t.Errorf("%s %s: pretokens of %q\n got %q\nwant %q", c.Tokenizer, c.ID, c.Text, got, c.Pretokens)
			}
		}
	}
	t.Logf("%d rows, %d wrong", len(cases), bad)
}

func TestFixtureEncodeDecode(t *testing.T) {
	cases := readCases(t)
	if want := fixtures.EncodingRows(t); len(cases) != want {
		t.Errorf("encodings.jsonl has %d rows, want %d (cases.jsonl x meta.json's tokenizers)", len(cases), want)
	}
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, c := range cases {
		tk := testSet().get(t, c.Tokenizer)
		if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			report("%s %s: Encode(%q, false)\n got %v\nwant %v", c.Tokenizer, c.ID, c.Text, got, c.IDs)
		}
		if got := tk.Encode(c.Text, true); !slices.Equal(got, c.IDsSpecial) && !(len(got) == 0 && len(c.IDsSpecial) == 0) {
			report("%s %s: Encode(%q, true)\n got %v\nwant %v", c.Tokenizer, c.ID, c.Text, got, c.IDsSpecial)
		}
		if got := tk.Decode(c.IDs); got != c.Decoded {
			report("%s %s: Decode(ids) = %q, want %q", c.Tokenizer, c.ID, got, c.Decoded)
		}
		if got := tk.Decode(c.IDsSpecial); got != c.DecodedSpecial {
			report("%s %s: Decode(ids_special) = %q, want %q", c.Tokenizer, c.ID, got, c.DecodedSpecial)
		}
	}
	t.Logf("%d rows, %d mismatches", len(cases), bad)
}
