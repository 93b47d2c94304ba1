package tokenizer

import (
	"unicode/utf8"
)

// byteLevel is GPT-2's reversible byte-to-unicode mapping: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100 onwards. Vocabulary strings are written in it.
type byteLevel struct {
	toRune [256]rune
	toByte [byteLevelMax]int16 // -1 for runes outside the mapping
}

// byteLevelMax bounds the runes the mapping uses (U+0021 .. U+0143).
const byteLevelMax = 0x144

func newByteLevel() *byteLevel {
	bl := &byteLevel{}
	for i := range bl.toByte {
		bl.toByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := '!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF
		if !printable {
			r = 256 + n
			n++
		}
		bl.toRune[b] = r
		bl.toByte[r] = int16(b)
	}
	return bl
}

// decode turns a byte-level string into raw bytes; ok is false when some char is outside
// the mapping (such tokens are added/special tokens written as plain text).
func (bl *byteLevel) decode(s string) ([]byte, bool) {
	out, ok := appendDecoded(bl, make([]byte, 0, len(s)), s)
	if !ok {
		return nil, false
	}
	return out, true
}

// appendDecoded appends the raw bytes of a byte-level string; ok is false when some char
// is outside the mapping (every char of the mapping is below U+0800, so a 3-byte or longer
// UTF-8 sequence never maps).
func appendDecoded[T string | []byte](bl *byteLevel, dst []byte, s T) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		r := rune(c)
		switch {
		case c < utf8.RuneSelf:
			i++
		case c&0xE0 == 0xC0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80:
			r = rune(c&0x1F)<<6 | rune(s[i+1]&0x3F)
			i += 2
		default:
			return dst, false
		}
		if r >= byteLevelMax || bl.toByte[r] < 0 {
			return dst, false
		}
		dst = append(dst, byte(bl.toByte[r]))
	}
	return dst, true
}

// encode maps raw bytes to the byte-level string.
func (bl *byteLevel) encode(b []byte) string {
	out := make([]rune, len(b))
	for i, c := range b {
		out[i] = bl.toRune[c]
	}
	return string(out)
}

// tokenBytes is what HF's ByteLevel decoder makes of one token: its bytes when every char
// maps, else the token's own UTF-8 text.
func (bl *byteLevel) tokenBytes(tok string) []byte {
	if b, ok := bl.decode(tok); ok {
		return b
	}
	return []byte(tok)
}

// appendLossy appends b to dst as valid UTF-8, replacing each maximal invalid subsequence
// with U+FFFD the way Rust's String::from_utf8_lossy (and so HF decode) does.
func appendLossy(dst []byte, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if r, w := utf8.DecodeRune(b[i:]); r != utf8.RuneError || w > 1 {
			dst = append(dst, b[i:i+w]...)
			i += w
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += validPrefix(b[i:])
	}
	return dst
}

// validPrefix is the length (>= 1) of the longest prefix of b that could start a valid
// UTF-8 sequence; b[0] is a non-ASCII byte.
func validPrefix(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case 0xC2 <= c && c <= 0xDF:
		need = 2
	case c == 0xE0:
		need, lo = 3, 0xA0
	case c == 0xED:
		need, hi = 3, 0x9F
	case 0xE1 <= c && c <= 0xEF:
		need = 3
	case c == 0xF0:
		need, lo = 4, 0x90
	case c == 0xF4:
		need, hi = 4, 0x8F
	case 0xF1 <= c && c <= 0xF3:
		need = 4
	default:
		return 1
	}
	n := 1
	for n < need && n < len(b) {
		c := b[n]
		if n == 1 && (c < lo || c > hi) || n > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n
}

// incompleteTail is the length of a trailing, still-completable UTF-8 sequence in b (0 if
// b ends on a character boundary or in an invalid sequence).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a lead byte: is b[len-k:] a proper prefix of a valid sequence?
			if p := validPrefix(b[len(b)-k:]); p == k && k < seqLen(c) {
				return k
			}
			return 0
		}
	}
	return 0
}

func seqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}
