package chattmpl

import (
	"strings"
)

// Reasoning styles.
const (
	StyleNone    = "none"    // no separate thinking
	StyleThink   = "think"   // <think>...</think> before the answer (Qwen3, DeepSeek-R1)
	StyleHarmony = "harmony" // gpt-oss channels: analysis = thinking, final = answer
)

// DetectStyle guesses the reasoning style from a chat template.
func DetectStyle(tmpl string) string {
	switch {
	case strings.Contains(tmpl, "<|channel|>"):
		return StyleHarmony
	case strings.Contains(tmpl, "<think>") || strings.Contains(tmpl, "</think>"):
		return StyleThink
	}
	return StyleNone
}

// ReasoningSplitter separates a model's streamed output into thinking and answer, piece by
// piece, holding back only text that may be the start of a marker.
type ReasoningSplitter struct {
	style string
	buf   string
	state int
	// harmony: the channel of the message being read, and whether <|start|> was just seen
	// (the role name that follows is part of the header)
	channel    string
	afterStart bool
	// think: drop the newlines that follow <think> and </think>, even across pieces
	skipNL bool
}

const (
	stStart    = iota // nothing decided yet
	stThinking        // inside <think> or an analysis message
	stAnswer          // answer text
	stHeader          // harmony: reading a header up to <|message|>
	stBetween         // harmony: after <|end|>, before the next <|start|>
	stDone            // harmony: after <|return|> or <|call|>
)

// NewReasoningSplitter makes a splitter for a style (StyleThink, StyleHarmony, StyleNone).
func NewReasoningSplitter(style string) *ReasoningSplitter {
	r := &ReasoningSplitter{style: style}
	if style == StyleHarmony {
		r.state = stHeader
	}
	return r
}

// StartThinking tells the splitter the prompt already opened the thinking block (templates
// that end the generation prompt with "<think>\n"), so output is thinking until </think>.
func (r *ReasoningSplitter) StartThinking() { r.state, r.skipNL = stThinking, true }

// Feed adds generated text and returns the new thinking and answer text.
func (r *ReasoningSplitter) Feed(text string) (thinking, answer string) {
	r.buf += text
	var th, an strings.Builder
	switch r.style {
	case StyleThink:
		r.feedThink(&th, &an, false)
	case StyleHarmony:
		r.feedHarmony(&th, &an, false)
	default:
		an.WriteString(r.buf)
		r.buf = ""
	}
	return th.String(), an.String()
}

// Flush returns whatever is still held back, at the end of generation.
func (r *ReasoningSplitter) Flush() (thinking, answer string) {
	var th, an strings.Builder
	switch r.style {
	case StyleThink:
		r.feedThink(&th, &an, true)
	case StyleHarmony:
		r.feedHarmony(&th, &an, true)
	}
	if r.buf != "" {
		if r.state == stThinking {
			th.WriteString(r.buf)
		} else if r.state != stDone && r.state != stHeader && r.state != stBetween {
			an.WriteString(r.buf)
		}
		r.buf = ""
	}
	return th.String(), an.String()
}

// partialSuffix is the length of the longest suffix of s that is a proper prefix of one
// of the markers.
func partialSuffix(s string, markers ...string) int {
	best := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(s)); k > best; k-- {
			if strings.HasSuffix(s, m[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

func (r *ReasoningSplitter) feedThink(th, an *strings.Builder, final bool) {
	for {
		switch r.state {
		case stStart:
			trimmed := strings.TrimLeft(r.buf, " \t\r\n")
			if strings.HasPrefix(trimmed, "<think>") {
				r.buf = trimmed[len("<think>"):]
				r.state, r.skipNL = stThinking, true
				continue
			}
			if !final && (trimmed == "" || strings.HasPrefix("<think>", trimmed)) {
				return // could still become <think>
			}
			r.state = stAnswer
		case stThinking:
			if r.dropNewlines() {
				return
			}
			if i := strings.Index(r.buf, "</think>"); i >= 0 {
				th.WriteString(strings.TrimRight(r.buf[:i], "\n"))
				r.buf = r.buf[i+len("</think>"):]
				r.state, r.skipNL = stAnswer, true
				continue
			}
			keep := 0
			if !final {
				keep = partialSuffix(r.buf, "</think>")
				// trailing newlines may precede </think> and are dropped with it
				keep = len(r.buf) - len(strings.TrimRight(r.buf[:len(r.buf)-keep], "\n"))
			}
			th.WriteString(r.buf[:len(r.buf)-keep])
			r.buf = r.buf[len(r.buf)-keep:]
			return
		default:
			if r.dropNewlines() {
				return
			}
			an.WriteString(r.buf)
			r.buf = ""
			return
		}
	}
}

// dropNewlines trims the newlines after a think tag; true when nothing else is buffered
// yet (more newlines may follow).
func (r *ReasoningSplitter) dropNewlines() bool {
	if !r.skipNL {
		return false
	}
	r.buf = strings.TrimLeft(r.buf, "\n")
	if r.buf == "" {
		return true
	}
	r.skipNL = false
	return false
}

// Harmony markers.
const (
	hStart   = "<|start|>"
	hChannel = "<|channel|>"
	hMessage = "<|message|>"
	hEnd     = "<|end|>"
	hReturn  = "<|return|>"
	hCall    = "<|call|>"
)

func (r *ReasoningSplitter) feedHarmony(th, an *strings.Builder, final bool) {
	for {
		switch r.state {
		case stHeader, stStart:
			i := strings.Index(r.buf, hMessage)
			if i < 0 {
				header := r.afterStart || strings.HasPrefix(r.buf, "<|") || strings.HasPrefix("<|", r.buf)
				if !final && header && len(r.buf) < 256 && !strings.Contains(r.buf, "\n") {
					return // a header is still arriving
				}
				r.channel, r.state = "final", stAnswer // not a header: plain answer text
				continue
			}
			head := r.buf[:i]
			r.channel = "final"
			if j := strings.Index(head, hChannel); j >= 0 {
				ch := head[j+len(hChannel):]
				if k := strings.IndexAny(ch, " <"); k >= 0 {
					ch = ch[:k]
				}
				r.channel = ch
			}
			r.buf = r.buf[i+len(hMessage):]
			r.afterStart = false
			if r.channel == "analysis" {
				r.state = stThinking
			} else {
				r.state = stAnswer
			}
		case stThinking, stAnswer:
			out := an
			if r.state == stThinking {
				out = th
			}
			best, marker := -1, ""
			for _, m := range []string{hEnd, hReturn, hCall, hStart} {
				if i := strings.Index(r.buf, m); i >= 0 && (best < 0 || i < best) {
					best, marker = i, m
				}
			}
			if best < 0 {
				keep := 0
				if !final {
					keep = partialSuffix(r.buf, hEnd, hReturn, hCall, hStart)
				}
				out.WriteString(r.buf[:len(r.buf)-keep])
				r.buf = r.buf[len(r.buf)-keep:]
				return
			}
			out.WriteString(r.buf[:best])
			r.buf = r.buf[best+len(marker):]
			switch marker {
			case hEnd:
				r.state = stBetween
			case hStart:
				r.state, r.afterStart = stHeader, true
			default:
				r.state = stDone
			}
		case stBetween:
			if i := strings.Index(r.buf, hStart); i >= 0 {
				r.buf = r.buf[i+len(hStart):]
				r.state, r.afterStart = stHeader, true
				continue
			}
			if !final && partialSuffix(r.buf, hStart) == len(r.buf) {
				return
			}
			if strings.HasPrefix(r.buf, hChannel) {
				r.state = stHeader
				continue
			}
			if r.buf == "" {
				return
			}
			r.state = stHeader
		case stDone:
			r.buf = ""
			return
		}
	}
}
