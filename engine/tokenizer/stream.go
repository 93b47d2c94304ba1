package tokenizer

// Stream turns generated ids into text for display as they arrive. A character that spans
// several tokens (an emoji, a CJK character split by BPE) is held back until complete, so
// the text it returns is always valid UTF-8, and the pieces concatenate to Decode(ids).
type Stream struct {
	t       *Tokenizer
	pending []byte // bytes of an incomplete trailing character
}

// NewStream starts a detokeniser for one generated sequence.
func (t *Tokenizer) NewStream() *Stream { return &Stream{t: t} }

// Add appends one id and returns the text it completes (maybe "").
func (s *Stream) Add(id int) string {
	if id < 0 || id >= len(s.t.pieces) {
		return ""
	}
	s.pending = append(s.pending, s.t.pieces[id]...)
	keep := incompleteTail(s.pending)
	out := appendLossy(nil, s.pending[:len(s.pending)-keep])
	s.pending = append(s.pending[:0], s.pending[len(s.pending)-keep:]...)
	return string(out)
}

// Flush returns what is still held (an incomplete character becomes U+FFFD) and resets.
func (s *Stream) Flush() string {
	out := appendLossy(nil, s.pending)
	s.pending = s.pending[:0]
	return string(out)
}
