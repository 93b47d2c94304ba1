// Package tokenizer turns text into token ids and back, exactly as Hugging Face tokenizers
// does for the byte-level BPE vocabularies of Qwen2/Qwen3, gpt-oss (o200k), Llama-3 and
// DeepSeek-V3. It loads from an HF tokenizer.json (FromHFJSON, LoadFile) or from a GGUF
// file's tokenizer.ggml.* metadata (FromGGUF); both build the same Tokenizer.
//
// Encoding follows HF's pipeline: added tokens are cut out first (leftmost-longest), the
// rest is normalised (NFC for Qwen3), split by the vocabulary's pre-tokenizer, and each
// piece is merged by BPE rank. The pre-tokenizers are written by hand rather than with
// regexp: Go's RE2 lacks the look-ahead the patterns use and its \s is ASCII only, and the
// hand-written matchers are several times faster.
//
// Special tokens are recognised in text only when Encode is asked to (parseSpecial);
// non-special added tokens (Qwen3's <think>) are always recognised, which is HF's rule.
package tokenizer

import (
	"runtime"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is an immutable byte-level BPE tokenizer; it is safe for concurrent use.
type Tokenizer struct {
	model   *bpe
	pre     preKind
	nfc     bool      // normalise to NFC before pre-tokenising (Qwen3)
	raw     addedTrie // added tokens matched before normalisation
	normed  addedTrie // added tokens matched after normalisation
	special []bool    // per id: a special/control token (matched only with parseSpecial)
	added   []bool    // per id: an added token (special or not)
	pieces  [][]byte  // per id: the bytes Decode emits
	text    []string  // per id: the token's vocabulary string
	bos     int       // -1 if none
	eos     int       // -1 if none
	addBOS  bool      // prepend BOS when encoding a whole prompt
	eog     map[int]bool
	tmpl    string // chat template, if the source had one
	pretok  string // name of the pre-tokenizer, for messages
}

// VocabSize is the number of ids (the largest id + 1).
func (t *Tokenizer) VocabSize() int { return len(t.text) }

// TokenText is the token's vocabulary string ("" for an unknown id).
func (t *Tokenizer) TokenText(id int) string {
	if id < 0 || id >= len(t.text) {
		return ""
	}
	return t.text[id]
}

// TokenBytes is what Decode emits for one token (nil for an unknown id).
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.pieces) {
		return nil
	}
	return t.pieces[id]
}

// ID returns the id of a token given by its vocabulary string, e.g. "<|im_end|>".
func (t *Tokenizer) ID(token string) (int, bool) {
	if id, ok := t.addedID(token); ok {
		return id, true
	}
	bl := newByteLevel()
	if raw, ok := bl.decode(token); ok {
		if id, ok := t.model.vocab.getBytes(raw); ok {
			return int(id), true
		}
	}
	for id, s := range t.text { // tokens outside the byte-level alphabet
		if s == token {
			return id, true
		}
	}
	return -1, false
}

// addedID finds an added token by its text.
func (t *Tokenizer) addedID(token string) (int, bool) {
	if id, end := t.raw.find(token); end == len(token) && id >= 0 {
		return int(id), true
	}
	if id, end := t.normed.find(token); end == len(token) && id >= 0 {
		return int(id), true
	}
	return -1, false
}

// IsSpecial reports whether id is a special (control) token.
func (t *Tokenizer) IsSpecial(id int) bool { return id >= 0 && id < len(t.special) && t.special[id] }

// BOS is the beginning-of-sequence token, if the vocabulary names one.
func (t *Tokenizer) BOS() (int, bool) { return t.bos, t.bos >= 0 }

// EOS is the end-of-sequence token, if the vocabulary names one.
func (t *Tokenizer) EOS() (int, bool) { return t.eos, t.eos >= 0 }

// AddBOS says whether a prompt should start with BOS (tokenizer.ggml.add_bos_token, or
// the post-processor of a tokenizer.json).
func (t *Tokenizer) AddBOS() bool { return t.addBOS && t.bos >= 0 }

// ChatTemplate is the model's Jinja chat template, "" if the source had none.
func (t *Tokenizer) ChatTemplate() string { return t.tmpl }

// PreTokenizer names the pre-tokenizer in use (qwen2, llama3, gpt-4o, deepseek-v3, ...).
func (t *Tokenizer) PreTokenizer() string { return t.pretok }

// IsEndOfGeneration reports whether generating id ends the model's turn: EOS, EOT/EOM and
// the end tokens of the known chat formats (<|im_end|>, <|endoftext|>, <|return|>, ...).
func (t *Tokenizer) IsEndOfGeneration(id int) bool { return t.eog[id] }

// endTokenNames are the turn-ending tokens of the chat formats Strata knows. gpt-oss's
// <|end|> is not among them: it closes the analysis message and generation goes on.
func endTokenNames() []string {
	return []string{"<|im_end|>", "<|endoftext|>", "<|return|>", "<|call|>", "<|eot_id|>",
		"<|eom_id|>", "<|end_of_text|>", "<｜end▁of▁sentence｜>", "<|EOT|>"}
}

func (t *Tokenizer) initEOG(extra ...int) {
	t.eog = make(map[int]bool)
	if t.eos >= 0 {
		t.eog[t.eos] = true
	}
	for _, id := range extra {
		if id >= 0 && id < len(t.text) {
			t.eog[id] = true
		}
	}
	for _, name := range endTokenNames() {
		if id, ok := t.addedID(name); ok {
			t.eog[id] = true
		}
	}
}

// Encode turns text into ids. With parseSpecial, special tokens written in the text (such
// as <|im_start|> in a rendered chat template) become their ids; without it they are
// tokenised as plain text, which is the mode for user input. BOS is never added here: see
// AddBOS.
func (t *Tokenizer) Encode(text string, parseSpecial bool) []int {
	out := make([]int, 0, len(text)/3+1)
	skip := func(id int32) bool { return !parseSpecial && t.special[id] }
	t.raw.split(text, skip, func(seg string, id int32) {
		if id >= 0 {
			out = append(out, int(id))
			return
		}
		if t.nfc {
			seg = norm.NFC.String(seg)
		}
		t.normed.split(seg, skip, func(seg string, id int32) {
			if id >= 0 {
				out = append(out, int(id))
				return
			}
			t.pre.split(seg, func(piece string) { out = t.model.encode(piece, out) })
		})
	})
	return out
}

// Pretokenize returns the pre-tokenizer's pieces of text after normalisation, without
// cutting out added tokens (HF's pre_tokenize_str on the normalised text).
func (t *Tokenizer) Pretokenize(text string) []string {
	if t.nfc {
		text = norm.NFC.String(text)
	}
	var out []string
	t.pre.split(text, func(p string) { out = append(out, p) })
	return out
}

// Decode turns ids back into text, as HF's decode with skip_special_tokens=false: special
// tokens appear as their text, and byte sequences that are not valid UTF-8 become U+FFFD.
// Unknown ids are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	var buf []byte
	for _, id := range ids {
		if id >= 0 && id < len(t.pieces) {
			buf = append(buf, t.pieces[id]...)
		}
	}
	return string(appendLossy(make([]byte, 0, len(buf)), buf))
}

// find is longest() anchored at 0 for a whole string.
func (t *addedTrie) find(s string) (int32, int) {
	if t.empty() || s == "" {
		return -1, 0
	}
	return t.longest(s, 0)
}

// builder collects a vocabulary from either source and makes the Tokenizer. Token texts
// and decode bytes go into two arenas and become substrings/subslices at the end, so a
// 150k vocabulary costs a handful of allocations rather than 300k.
type builder struct {
	bl         *byteLevel
	t          *Tokenizer
	skipped    int    // merges that name tokens not in the vocabulary
	textArena  []byte // token texts
	textSpan   []span
	pieceArena []byte // decode bytes
	pieceSpan  []span
}

type span struct{ off, n uint32 }

func newBuilder(size, mergeCount int) *builder {
	t := &Tokenizer{
		model:   newBPE(size, mergeCount),
		special: make([]bool, size),
		added:   make([]bool, size),
		bos:     -1,
		eos:     -1,
	}
	return &builder{bl: newByteLevel(), t: t, textSpan: make([]span, size), pieceSpan: make([]span, size),
		textArena: make([]byte, 0, 8*size), pieceArena: make([]byte, 0, 6*size)}
}

func (b *builder) grow(id int) {
	for id >= len(b.textSpan) {
		b.textSpan = append(b.textSpan, span{})
		b.pieceSpan = append(b.pieceSpan, span{})
		b.t.special = append(b.t.special, false)
		b.t.added = append(b.t.added, false)
	}
}

func (b *builder) setText(id int, tok string) { setText(b, id, tok) }

func setText[T string | []byte](b *builder, id int, tok T) {
	b.textSpan[id] = span{uint32(len(b.textArena)), uint32(len(tok))}
	b.textArena = append(b.textArena, tok...)
}

func (b *builder) setPiece(id int, p []byte) {
	b.pieceSpan[id] = span{uint32(len(b.pieceArena)), uint32(len(p))}
	b.pieceArena = append(b.pieceArena, p...)
}

// normal registers a vocabulary token written in the byte-level alphabet.
func (b *builder) normal(tok string, id int) { addNormal(b, tok, id) }

func addNormal[T string | []byte](b *builder, tok T, id int) {
	b.grow(id)
	setText(b, id, tok)
	start := len(b.pieceArena)
	var ok bool
	b.pieceArena, ok = appendDecoded(b.bl, b.pieceArena, tok)
	if ok {
		raw := b.pieceArena[start:]
		b.pieceSpan[id] = span{uint32(start), uint32(len(raw))}
		b.t.model.addToken(raw, int32(id))
	} else {
		b.pieceArena = append(b.pieceArena[:start], tok...)
		b.pieceSpan[id] = span{uint32(start), uint32(len(tok))}
	}
}

// other registers a token that is neither BPE vocabulary nor matched in text (GGUF's
// UNKNOWN and UNUSED types).
func (b *builder) other(tok string, id int) {
	b.grow(id)
	b.setText(id, tok)
	b.setPiece(id, b.bl.tokenBytes(tok))
}

// addedTok registers an added token. decodeBytes is what Decode emits for it.
func (b *builder) addedTok(content string, id int, special, normalized bool, decodeBytes []byte) {
	b.grow(id)
	b.setText(id, content)
	b.setPiece(id, decodeBytes)
	b.t.special[id] = special
	b.t.added[id] = true
	if normalized && b.t.nfc {
		b.t.normed.add(norm.NFC.String(content), int32(id))
	} else if normalized {
		b.t.normed.add(content, int32(id))
	} else {
		b.t.raw.add(content, int32(id))
	}
}

// finish turns the arenas into the per-id texts and pieces.
func (b *builder) finish() *Tokenizer {
	t := b.t
	texts := string(b.textArena)
	t.text = make([]string, len(b.textSpan))
	for id, sp := range b.textSpan {
		t.text[id] = texts[sp.off : sp.off+sp.n]
	}
	t.pieces = make([][]byte, len(b.pieceSpan))
	for id, sp := range b.pieceSpan {
		t.pieces[id] = b.pieceArena[sp.off : sp.off+sp.n : sp.off+sp.n]
	}
	return t
}

// addMerges registers merges given as pairs of byte-level strings, in rank order. The
// vocabulary look-ups run on several goroutines (the vocab map is only read); the table is
// then filled in rank order.
func addMerges[T string | []byte](b *builder, pairs [][2]T) {
	type resolved struct {
		key uint64
		id  int32
		ok  bool
	}
	if b.t.model.merges.n == 0 { // size the table now that the count is known
		b.t.model.merges = newPairTable(len(pairs))
	}
	res := make([]resolved, len(pairs))
	workers := min(runtime.GOMAXPROCS(0), 4, len(pairs)/4096+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			var buf []byte
			for r := lo; r < hi; r++ {
				var ok1, ok2 bool
				buf, ok1 = appendDecoded(b.bl, buf[:0], pairs[r][0])
				la := len(buf)
				buf, ok2 = appendDecoded(b.bl, buf, pairs[r][1])
				if ok1 && ok2 {
					res[r].key, res[r].id, res[r].ok = b.t.model.mergeOf(buf, la)
				}
			}
		}(w*len(pairs)/workers, (w+1)*len(pairs)/workers)
	}
	wg.Wait()
	for r, x := range res {
		if !x.ok {
			b.skipped++
			continue
		}
		b.t.model.merges.put(x.key, merge{int32(r), x.id})
	}
}

// splitMerge cuts a "left right" merge line.
func splitMerge(s string) (string, string, bool) {
	i := strings.IndexByte(s, ' ')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}
