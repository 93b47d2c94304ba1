package synth

import (
	"fmt"
	"strings"
)

// Token types as llama.cpp numbers them.
const (
	tokenNormal  = 1
	tokenControl = 3
)

// minVocab is the 256 byte tokens plus the three specials.
const minVocab = 256 + 3

// chatTemplate is ChatML, as Qwen models use it (without tool calls).
const chatTemplate = `{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// byteToUnicode is GPT-2's reversible map from a byte to the rune that stands for it in
// byte-level BPE vocabularies: printable Latin-1 bytes map to themselves, the others to
// 256, 257, ... in byte order.
func byteToUnicode(b byte) rune {
	printable := func(c int) bool { return c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF }
	if printable(int(b)) {
		return rune(b)
	}
	n := 0
	for c := 0; c < int(b); c++ {
		if !printable(c) {
			n++
		}
	}
	return rune(256 + n)
}

// byteLevel spells s in byte-level runes ("Ġ" for a space, and so on).
func byteLevel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToUnicode(s[i]))
	}
	return b.String()
}

// englishMerges are a few real byte-pair merges of English text, in rank order; each
// merge's parts are byte tokens or the results of earlier merges.
func englishMerges() [][2]string {
	pairs := [][2]string{
		{" ", "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {" ", "a"}, {"o", "n"}, {"r", "e"},
		{" t", "he"}, {" ", "s"}, {"a", "t"}, {"e", "n"}, {" ", "w"}, {"o", "r"}, {"i", "s"}, {"i", "t"},
		{"e", "s"}, {" ", "o"}, {"e", "d"}, {" ", "c"}, {"in", "g"}, {" ", "b"}, {"o", "u"}, {" ", "f"},
		{"n", "d"}, {" ", "p"}, {"a", "r"}, {" ", "m"}, {" ", "in"}, {" t", "o"}, {" a", "nd"}, {" o", "f"},
		{"l", "l"}, {" ", "h"}, {" ", "d"}, {" ", "l"}, {" ", "is"}, {" ", "I"}, {"l", "e"}, {"h", "at"},
		{" t", "hat"}, {" w", "it"}, {" wit", "h"}, {"o", "m"}, {"a", "l"}, {" f", "or"}, {" ", "y"}, {" y", "ou"},
		{" ", "H"}, {" H", "e"}, {" He", "ll"}, {" Hell", "o"}, {"H", "e"}, {"He", "ll"}, {"Hell", "o"}, {" w", "or"},
		{" wor", "l"}, {" worl", "d"},
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		out[i] = [2]string{byteLevel(p[0]), byteLevel(p[1])}
	}
	return out
}

// vocabulary is the embedded tokenizer: byte tokens (id = byte value), merge results,
// <unused_N> padding, then <|endoftext|>, <|im_start|>, <|im_end|>.
type vocabulary struct {
	tokens                 []string
	types                  []int32
	merges                 []string
	bos, eos, pad, imStart int
}

func newVocabulary(size int) (vocabulary, error) {
	if size < minVocab {
		return vocabulary{}, fmt.Errorf("synth: vocab %d is below %d", size, minVocab)
	}
	v := vocabulary{tokens: make([]string, 0, size)}
	for b := 0; b < 256; b++ {
		v.tokens = append(v.tokens, string(byteToUnicode(byte(b))))
	}
	room := size - minVocab
	for _, m := range englishMerges() {
		if room == 0 {
			break
		}
		v.merges = append(v.merges, m[0]+" "+m[1])
		v.tokens = append(v.tokens, m[0]+m[1])
		room--
	}
	if len(v.merges) == 0 {
		// llama.cpp wants a merges key for gpt2 vocabularies; one merge of two bytes
		// needs no token of its own to be loadable.
		m := englishMerges()[0]
		v.merges = append(v.merges, m[0]+" "+m[1])
	}
	for n := 0; len(v.tokens) < size-3; n++ {
		v.tokens = append(v.tokens, fmt.Sprintf("<unused_%d>", n))
	}
	v.bos, v.pad = len(v.tokens), len(v.tokens)
	v.imStart = len(v.tokens) + 1
	v.eos = len(v.tokens) + 2
	v.tokens = append(v.tokens, "<|endoftext|>", "<|im_start|>", "<|im_end|>")
	v.types = make([]int32, size)
	for i := range v.types {
		v.types[i] = tokenNormal
	}
	for _, id := range []int{v.bos, v.imStart, v.eos} {
		v.types[id] = tokenControl
	}
	return v, nil
}
