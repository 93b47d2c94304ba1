package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStreamFixtures streams every reference encoding id by id: each piece must be valid
// UTF-8 and the pieces must add up to the reference decode.
func TestStreamFixtures(t *testing.T) {
	for _, c := range readCases(t) {
		tk := testSet().get(t, c.Tokenizer)
		s := tk.NewStream()
		var sb strings.Builder
		for _, id := range c.IDs {
			p := s.Add(id)
			if !utf8.ValidString(p) {
				t.Fatalf("%s %s: Stream.Add(%d) returned invalid UTF-8 %q", c.Tokenizer, c.ID, id, p)
			}
			sb.WriteString(p)
		}
		sb.WriteString(s.Flush())
		if sb.String() != c.Decoded {
			t.Errorf("%s %s: streamed %q, want %q", c.Tokenizer, c.ID, sb.String(), c.Decoded)
		}
	}
}

// TestStreamSplitCharacter uses a GGUF-style vocabulary of single bytes to feed a 4-byte
// emoji one byte at a time, and broken sequences that must become U+FFFD.
func TestStreamSplitCharacter(t *testing.T) {
	bl := newByteLevel()
	tokens := make([]string, 256)
	types := make([]int64, 256)
	for i := range tokens {
		tokens[i] = bl.encode([]byte{byte(i)})
		types[i] = tokNormal
	}
	tk, err := FromGGUF(mapMeta{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
		"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges": []string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in    []byte
		steps []string // what each Add returns
		flush string
	}{
		{[]byte("a😀b"), []string{"a", "", "", "", "😀", "b"}, ""},
		{[]byte{0xF0, 0x9F, 0x98}, []string{"", "", ""}, "\uFFFD"},
		{[]byte{0xF0, 0x9F, 'x'}, []string{"", "", "\uFFFDx"}, ""},
		{[]byte{0x80, 0x80, 'y'}, []string{"\uFFFD", "\uFFFD", "y"}, ""},
		{[]byte{0xE2, 0x82, 0xAC, 0xED, 0xA0}, []string{"", "", "€", "", "\uFFFD\uFFFD"}, ""}, // ED A0 is two maximal invalid parts
	} {
		s := tk.NewStream()
		var ids []int
		for i, b := range tc.in {
			ids = append(ids, int(b))
			if got := s.Add(int(b)); got != tc.steps[i] {
				t.Errorf("%q: Add #%d = %q, want %q", tc.in, i, got, tc.steps[i])
			}
		}
		if got := s.Flush(); got != tc.flush {
			t.Errorf("%q: Flush = %q, want %q", tc.in, got, tc.flush)
		}
		if got, want := tk.Decode(ids), strings.Join(tc.steps, "")+tc.flush; got != want {
			t.Errorf("%q: Decode = %q, stream gave %q", tc.in, got, want)
		}
	}
}
