package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// preKind names one hand-written pre-tokenizer. Each reproduces, without regexp, the
// Oniguruma pattern HF tokenizers runs for that vocabulary (Go's RE2 has no look-ahead and
// its \s is ASCII only), including backtracking order between the alternatives.
type preKind int

const (
	preGPT2      preKind = iota // GPT-2's original ByteLevel regex
	preQwen2                    // Qwen2/Qwen3: one digit per piece
	preQwen35                   // Qwen3.5: letters include \p{M}
	preLlama3                   // Llama-3: digits in runs of up to 3
	preO200k                    // gpt-4o / gpt-oss (o200k)
	preDeepSeek3                // DeepSeek-V3: digits, then CJK, then the main pattern
)

func (k preKind) String() string {
	switch k {
	case preGPT2:
		return "gpt2"
	case preQwen2:
		return "qwen2"
	case preQwen35:
		return "qwen35"
	case preLlama3:
		return "llama3"
	case preO200k:
		return "gpt-4o"
	case preDeepSeek3:
		return "deepseek-v3"
	}
	return fmt.Sprintf("preKind(%d)", int(k))
}

// preKindForGGUF maps tokenizer.ggml.pre (llama.cpp's names) to a pre-tokenizer.
func preKindForGGUF(name string) (preKind, error) {
	switch name {
	case "qwen2", "deepseek-r1-qwen":
		return preQwen2, nil
	case "qwen35":
		return preQwen35, nil
	case "llama3", "llama-v3", "llama-bpe":
		return preLlama3, nil
	case "gpt-4o":
		return preO200k, nil
	case "deepseek-v3":
		return preDeepSeek3, nil
	case "gpt2", "gpt-2":
		return preGPT2, nil
	}
	return 0, fmt.Errorf("unsupported pre-tokenizer %q (supported: qwen2, qwen35, llama-bpe, gpt-4o, deepseek-v3, gpt2)", name)
}

// The exact regexes of tokenizer.json files that map onto a hand-written pre-tokenizer.
const (
	reQwen2   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen35  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reLlama3  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reO200k   = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reGPT2    = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	reDSDigit = `\p{N}{1,3}`
	reDSCJK   = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	reDSMain  = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// preKindForRegexes recognises a sequence of Split regexes from a tokenizer.json.
func preKindForRegexes(res []string) (preKind, error) {
	if len(res) == 1 {
		switch res[0] {
		case reQwen2:
			return preQwen2, nil
		case reQwen35:
			return preQwen35, nil
		case reLlama3:
			return preLlama3, nil
		case reO200k:
			return preO200k, nil
		case reGPT2:
			return preGPT2, nil
		}
	}
	if len(res) == 3 && res[0] == reDSDigit && res[1] == reDSCJK && res[2] == reDSMain {
		return preDeepSeek3, nil
	}
	return 0, fmt.Errorf("unsupported pre-tokenizer regex sequence %q", res)
}

// split cuts s into pre-tokens, calling emit for each in order. The pieces concatenate to s.
func (k preKind) split(s string, emit func(string)) {
	switch k {
	case preGPT2:
		splitWith(s, matchGPT2, emit)
	case preQwen2:
		splitWith(s, func(s string, i int) int { return matchGPT4(s, i, 1, false) }, emit)
	case preQwen35:
		splitWith(s, func(s string, i int) int { return matchGPT4(s, i, 1, true) }, emit)
	case preLlama3:
		splitWith(s, func(s string, i int) int { return matchGPT4(s, i, 3, false) }, emit)
	case preO200k:
		splitWith(s, matchO200k, emit)
	case preDeepSeek3:
		splitWith(s, func(s string, i int) int { return matchDigits(s, i, 3) }, func(p1 string) {
			splitWith(p1, matchDSCJK, func(p2 string) {
				splitWith(p2, matchDSMain, emit)
			})
		})
	}
}

// splitWith is HF's Split(behavior=Isolated): every match is a piece and so is every gap
// between matches. match returns the end of the match starting at i, or -1.
func splitWith(s string, match func(s string, i int) int, emit func(string)) {
	gap := -1
	for i := 0; i < len(s); {
		if e := match(s, i); e > i {
			if gap >= 0 {
				emit(s[gap:i])
				gap = -1
			}
			emit(s[i:e])
			i = e
			continue
		}
		if gap < 0 {
			gap = i
		}
		_, w := at(s, i)
		i += w
	}
	if gap >= 0 {
		emit(s[gap:])
	}
}

// at decodes the rune at i; past the end it returns (-1, 0). An invalid byte reads as
// U+FFFD of width 1 (HF never sees one: Rust strings are valid UTF-8).
func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func isL(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsNumber(r)
}

func isM(r rune) bool { return r >= 0x300 && unicode.Is(unicode.M, r) }

// isSpace is Oniguruma's \s: [\t\n\v\f\r \x85] and \p{Z}.
func isSpace(r rune) bool {
	switch {
	case r < 0:
		return false
	case r < utf8.RuneSelf:
		return r == ' ' || '\t' <= r && r <= '\r'
	case r == 0x85 || r == 0xA0:
		return true
	case r < 0x1680:
		return false
	}
	return unicode.Is(unicode.Z, r)
}

func isCRLF(r rune) bool { return r == '\r' || r == '\n' }

// contraction matches (?i:s|t|re|ve|m|ll|d) at i (after the apostrophe); 0 if none.
// Oniguruma folds ſ (U+017F) to s, like Go's (?i).
func contraction(s string, i int) int {
	r, w := at(s, i)
	switch r {
	case 's', 'S', 'ſ', 't', 'T', 'm', 'M', 'd', 'D':
		return w
	case 'r', 'R', 'v', 'V':
		if r2, w2 := at(s, i+w); r2 == 'e' || r2 == 'E' {
			return w + w2
		}
	case 'l', 'L':
		if r2, w2 := at(s, i+w); r2 == 'l' || r2 == 'L' {
			return w + w2
		}
	}
	return 0
}

// contractionCS is GPT-2's case-sensitive 's|'t|'re|'ve|'m|'ll|'d after the apostrophe.
func contractionCS(s string, i int) int {
	r, w := at(s, i)
	switch r {
	case 's', 't', 'm', 'd':
		return w
	case 'r', 'v':
		if r2, w2 := at(s, i+w); r2 == 'e' {
			return w + w2
		}
	case 'l':
		if r2, w2 := at(s, i+w); r2 == 'l' {
			return w + w2
		}
	}
	return 0
}

// runOf returns the end of the run of runes satisfying f that starts at i.
func runOf(s string, i int, f func(rune) bool) int {
	for i < len(s) {
		r, w := at(s, i)
		if !f(r) {
			break
		}
		i += w
	}
	return i
}

// matchSpace covers the shared tail `\s*[\r\n]+|\s+(?!\S)|\s+`.
func matchSpace(s string, i int) int {
	j, afterNL, last, n := i, -1, i, 0
	for j < len(s) {
		r, w := at(s, j)
		if !isSpace(r) {
			break
		}
		last = j
		j += w
		n++
		if isCRLF(r) {
			afterNL = j
		}
	}
	switch {
	case n == 0:
		return -1
	case afterNL > 0: // \s*[\r\n]+ backtracks to the last line break of the run
		return afterNL
	case j == len(s) || n == 1: // (?!\S) holds at the end; a single space falls to \s+
		return j
	}
	return last // \s+(?!\S) gives back the last space before a non-space
}

func matchDigits(s string, i, max int) int {
	j := i
	for n := 0; n < max; n++ {
		r, w := at(s, j)
		if !isN(r) {
			break
		}
		j += w
	}
	if j == i {
		return -1
	}
	return j
}

// matchGPT4 is the Qwen2/Qwen3.5/Llama-3 pattern:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?L+|\p{N}{1,max}| ?[^\s L \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where L is \p{L}, or [\p{L}\p{M}] when marks is set.
func matchGPT4(s string, i, maxDigits int, marks bool) int {
	r0, w0 := at(s, i)
	if r0 == '\'' {
		if n := contraction(s, i+1); n > 0 {
			return i + 1 + n
		}
	}
	letter := isL
	if marks {
		letter = func(r rune) bool { return isL(r) || isM(r) }
	}
	if !isCRLF(r0) && !isL(r0) && !isN(r0) {
		if r1, w1 := at(s, i+w0); w1 > 0 && letter(r1) {
			return runOf(s, i+w0+w1, letter)
		}
	}
	if letter(r0) {
		return runOf(s, i+w0, letter)
	}
	if isN(r0) {
		return matchDigits(s, i, maxDigits)
	}
	other := func(r rune) bool { return r >= 0 && !isSpace(r) && !letter(r) && !isN(r) }
	if e := matchPunct(s, i, r0, w0, other, isCRLF); e > 0 {
		return e
	}
	return matchSpace(s, i)
}

// matchPunct is ` ?O+T*` for a class O and a trailing class T.
func matchPunct(s string, i int, r0 rune, w0 int, other, trail func(rune) bool) int {
	j := i
	if r0 == ' ' {
		if r1, _ := at(s, i+1); other(r1) {
			j = i + 1
		}
	}
	if r, _ := at(s, j); !other(r) {
		return -1
	}
	return runOf(s, runOf(s, j, other), trail)
}

func matchGPT2(s string, i int) int {
	r0, w0 := at(s, i)
	if r0 == '\'' {
		if n := contractionCS(s, i+1); n > 0 {
			return i + 1 + n
		}
	}
	j := i
	if r0 == ' ' {
		j = i + w0
	}
	r1, _ := at(s, j)
	if isL(r1) {
		return runOf(s, j, isL)
	}
	if isN(r1) {
		return runOf(s, j, isN)
	}
	other := func(r rune) bool { return r >= 0 && !isSpace(r) && !isL(r) && !isN(r) }
	if other(r1) {
		return runOf(s, j, other)
	}
	// \s+(?!\S)|\s+ (no line-break alternative in GPT-2)
	j, last, n := i, i, 0
	for j < len(s) {
		r, w := at(s, j)
		if !isSpace(r) {
			break
		}
		last, j, n = j, j+w, n+1
	}
	switch {
	case n == 0:
		return -1
	case j == len(s) || n == 1:
		return j
	}
	return last
}

func isO200kUpper(r rune) bool { // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

func isO200kLower(r rune) bool { // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}

// o200kWord matches U*W+ (upperFirst=false) or U+W* (upperFirst=true) at p, then the
// optional contraction; -1 if none. It follows the backtracking a regex engine does when
// the W+ after a greedy U* finds nothing.
func o200kWord(s string, p int, upperFirst bool) int {
	q := runOf(s, p, isO200kUpper)
	var r int
	if upperFirst {
		if q == p {
			return -1
		}
		r = runOf(s, q, isO200kLower)
	} else {
		r = runOf(s, q, isO200kLower)
		if r == q { // give back U chars until one of them is also in W
			r = -1
			for k := q; k > p; {
				c, w := utf8.DecodeLastRuneInString(s[p:k])
				if isO200kLower(c) {
					r = k
					break
				}
				k -= w
			}
			if r < 0 {
				return -1
			}
		}
	}
	if c, _ := at(s, r); c == '\'' {
		if n := contraction(s, r+1); n > 0 {
			r += 1 + n
		}
	}
	return r
}

func matchO200k(s string, i int) int {
	r0, w0 := at(s, i)
	prefix := !isCRLF(r0) && !isL(r0) && !isN(r0)
	for _, upperFirst := range [2]bool{false, true} {
		if prefix {
			if e := o200kWord(s, i+w0, upperFirst); e > 0 {
				return e
			}
		}
		if e := o200kWord(s, i, upperFirst); e > 0 {
			return e
		}
	}
	if isN(r0) {
		return matchDigits(s, i, 3)
	}
	other := func(r rune) bool { return r >= 0 && !isSpace(r) && !isL(r) && !isN(r) }
	if e := matchPunct(s, i, r0, w0, other, func(r rune) bool { return isCRLF(r) || r == '/' }); e > 0 {
		return e
	}
	return matchSpace(s, i)
}

func matchDSCJK(s string, i int) int {
	cjk := func(r rune) bool {
		return 0x4e00 <= r && r <= 0x9fa5 || 0x3040 <= r && r <= 0x309f || 0x30a0 <= r && r <= 0x30ff
	}
	if e := runOf(s, i, cjk); e > i {
		return e
	}
	return -1
}

func isASCIIPunct(r rune) bool {
	return '!' <= r && r <= '/' || ':' <= r && r <= '@' || '[' <= r && r <= '`' || '{' <= r && r <= '~'
}

func isPS(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIIPunct(r)
	}
	return r >= 0 && (unicode.IsPunct(r) || unicode.IsSymbol(r))
}

func isLM(r rune) bool { return isL(r) || isM(r) }

// matchDSMain is DeepSeek-V3's third pattern:
// [ASCII punct][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchDSMain(s string, i int) int {
	r0, w0 := at(s, i)
	if isASCIIPunct(r0) {
		asciiL := func(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }
		if e := runOf(s, i+1, asciiL); e > i+1 {
			return e
		}
	}
	if !isCRLF(r0) && !isL(r0) && !isPS(r0) {
		if r1, w1 := at(s, i+w0); w1 > 0 && isLM(r1) {
			return runOf(s, i+w0+w1, isLM)
		}
	}
	if isLM(r0) {
		return runOf(s, i+w0, isLM)
	}
	if e := matchPunct(s, i, r0, w0, isPS, isCRLF); e > 0 {
		return e
	}
	return matchSpace(s, i)
}
