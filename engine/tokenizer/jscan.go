package tokenizer

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jscan is a minimal JSON reader over a byte slice, used to read the large vocab and
// merges sections of a tokenizer.json several times faster than encoding/json (a 150k
// vocabulary must load in well under 100 ms). Small sections are handed to encoding/json.
type jscan struct {
	b []byte
	i int
	// fill, when set, blocks until byte need has arrived (or the input ended) and returns
	// the longer buffer; it lets parsing overlap with gunzip. Earlier slices of b stay valid.
	fill func(need int) []byte
}

// has reports whether byte i exists, waiting for it if the input is still arriving.
func (s *jscan) has(i int) bool {
	return i < len(s.b) || s.refill(i)
}

// refill is has's slow path, kept out of line so that has inlines.
//
//go:noinline
func (s *jscan) refill(i int) bool {
	if s.fill == nil {
		return false
	}
	s.b = s.fill(i)
	return i < len(s.b)
}

func (s *jscan) errf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *jscan) ws() {
	for s.has(s.i) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *jscan) peek() byte {
	s.ws()
	if !s.has(s.i) {
		return 0
	}
	return s.b[s.i]
}

func (s *jscan) expect(c byte) error {
	if s.peek() != c {
		if !s.has(s.i) {
			return s.errf("unexpected end of JSON, want %q", c)
		}
		return s.errf("want %q, found %q", c, s.b[s.i])
	}
	s.i++
	return nil
}

// more consumes a ',' before the next element, or reports the closing delimiter.
func (s *jscan) more(end byte, first bool) (bool, error) {
	c := s.peek()
	if c == end {
		s.i++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, s.errf("want ',' or %q", end)
		}
		s.i++
	}
	return true, nil
}

func (s *jscan) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// strBytes reads a string; without escapes the result aliases the buffer.
func (s *jscan) strBytes() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.i
	for s.has(s.i) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1 : s.i-1], nil
		case c == '\\':
			return s.strSlow(start)
		case c < 0x20:
			return nil, s.errf("control character in string")
		}
		s.i++
	}
	return nil, s.errf("unterminated string")
}

func (s *jscan) strSlow(start int) ([]byte, error) {
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.has(s.i) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out, nil
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if !s.has(s.i + 1) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return nil, err
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.has(s.i+1) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if r2, err = s.hex4(); err != nil {
						return nil, err
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						s.i = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.errf("bad escape \\%c", e)
		}
	}
	return nil, s.errf("unterminated string")
}

func (s *jscan) hex4() (rune, error) {
	if !s.has(s.i + 3) {
		return 0, s.errf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, s.errf("bad \\u escape")
	}
	s.i += 4
	return rune(v), nil
}

func (s *jscan) integer() (int, error) {
	s.ws()
	start := s.i
	if s.has(s.i) && s.b[s.i] == '-' {
		s.i++
	}
	for s.has(s.i) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	v, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil {
		return 0, s.errf("want an integer")
	}
	return v, nil
}

// skip passes over one value and returns its bytes.
func (s *jscan) skip() ([]byte, error) {
	s.ws()
	start := s.i
	if !s.has(s.i) {
		return nil, s.errf("unexpected end of JSON, want a value")
	}
	switch s.b[s.i] {
	case '"':
		if _, err := s.str(); err != nil {
			return nil, err
		}
		return s.b[start:s.i], nil
	case '{', '[':
	default: // number, true, false, null
		for s.has(s.i) && !bytes.ContainsRune([]byte(",}] \t\n\r:"), rune(s.b[s.i])) {
			s.i++
		}
		if s.i == start {
			return nil, s.errf("want a value")
		}
		return s.b[start:s.i], nil
	}
	depth := 0
	for s.has(s.i) {
		switch c := s.b[s.i]; c {
		case '"':
			if _, err := s.str(); err != nil {
				return nil, err
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return s.b[start:s.i], nil
			}
		}
		s.i++
	}
	return nil, s.errf("unexpected end of JSON")
}

// object calls field for each key; field must consume the value.
func (s *jscan) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		ok, err := s.more('}', first)
		if err != nil || !ok {
			return err
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(k); err != nil {
			return err
		}
	}
}

// array calls elem for each element; elem must consume it.
func (s *jscan) array(elem func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		ok, err := s.more(']', first)
		if err != nil || !ok {
			return err
		}
		if err := elem(); err != nil {
			return err
		}
	}
}
