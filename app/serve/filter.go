package serve

import (
	"encoding/json"
	"strings"
)

// stopFilter passes streamed text through until one of the stop sequences appears; text
// that could be the start of one is held back until the next piece decides it.
type stopFilter struct {
	stops   []string
	pending string
	hit     bool
}

// feed returns the text that is safe to send, and whether a stop sequence was reached
// (nothing after it is ever returned).
func (f *stopFilter) feed(s string) (string, bool) {
	if f.hit {
		return "", true
	}
	f.pending += s
	first := -1
	for _, st := range f.stops {
		if i := strings.Index(f.pending, st); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		out := f.pending[:first]
		f.pending, f.hit = "", true
		return out, true
	}
	keep := 0
	for _, st := range f.stops {
		keep = max(keep, prefixSuffix(f.pending, st))
	}
	out := f.pending[:len(f.pending)-keep]
	f.pending = f.pending[len(f.pending)-keep:]
	return out, false
}

// flush returns what was held back when the answer ended without a stop sequence.
func (f *stopFilter) flush() string {
	out := f.pending
	f.pending = ""
	return out
}

// prefixSuffix is the length of the longest suffix of s that is a proper prefix of marker.
func prefixSuffix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

// Tool calls written the way Qwen and Hermes templates define them:
// <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
const (
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// How a template has the model write its tool calls.
const (
	callsNone    = ""
	callsHermes  = "hermes"  // <tool_call>{"name": ..., "arguments": ...}</tool_call> (Qwen)
	callsHarmony = "harmony" // <|channel|>commentary to=functions.NAME ...<|message|>ARGS<|call|> (gpt-oss)
)

// callFormat is the tool-call format of a template, callsNone when it takes no tools.
func callFormat(tmpl string) string {
	switch {
	case !strings.Contains(tmpl, "tools"):
		return callsNone
	case strings.Contains(tmpl, toolCallOpen):
		return callsHermes
	case strings.Contains(tmpl, "<|channel|>") && strings.Contains(tmpl, "functions."):
		return callsHarmony
	}
	return callsNone
}

// toolHold streams an answer's text up to the first tool call and keeps the rest, which
// is parsed when the answer is complete. Harmony calls are read from the raw tokens (the
// reasoning splitter drops the header that names the function), so with them the whole
// answer is held.
type toolHold struct {
	format  string
	pending string
	held    strings.Builder
}

func (h *toolHold) feed(s string) string {
	switch {
	case h.format == callsNone:
		return s
	case h.format == callsHarmony || h.held.Len() > 0:
		h.held.WriteString(s)
		return ""
	}
	h.pending += s
	if i := strings.Index(h.pending, toolCallOpen); i >= 0 {
		out := h.pending[:i]
		h.held.WriteString(h.pending[i:])
		h.pending = ""
		return out
	}
	keep := prefixSuffix(h.pending, toolCallOpen)
	out := h.pending[:len(h.pending)-keep]
	h.pending = h.pending[len(h.pending)-keep:]
	return out
}

// finish parses the held text (raw: the answer's tokens as text, specials included, for
// harmony): the calls it holds, and any text that is not a well-formed call (returned as
// content rather than lost).
func (h *toolHold) finish(raw string) (calls []toolCall, rest string) {
	if h.format == callsHarmony {
		text := h.held.String()
		h.held.Reset()
		if calls := parseHarmonyCalls(raw); len(calls) > 0 {
			return calls, ""
		}
		return nil, text
	}
	rest = h.pending
	h.pending = ""
	text := h.held.String()
	h.held.Reset()
	var other strings.Builder
	for text != "" {
		i := strings.Index(text, toolCallOpen)
		if i < 0 {
			other.WriteString(text)
			break
		}
		other.WriteString(text[:i])
		body := text[i+len(toolCallOpen):]
		j := strings.Index(body, toolCallClose)
		end := len(body)
		if j >= 0 {
			end = j
		}
		call, ok := parseToolCall(body[:end])
		if !ok {
			other.WriteString(text[i : i+len(toolCallOpen)+min(len(body), end+len(toolCallClose))])
		} else {
			calls = append(calls, call)
		}
		if j < 0 {
			break
		}
		text = body[j+len(toolCallClose):]
	}
	rest += other.String()
	if len(calls) > 0 {
		rest = strings.TrimSpace(rest)
	}
	return calls, rest
}

// parseHarmonyCalls reads gpt-oss calls: a header with "to=functions.NAME", then
// <|message|>, the arguments, and <|call|> (or the end of the answer).
func parseHarmonyCalls(raw string) []toolCall {
	var calls []toolCall
	for {
		i := strings.Index(raw, "to=functions.")
		if i < 0 {
			return calls
		}
		raw = raw[i+len("to=functions."):]
		name := raw
		if k := strings.IndexAny(name, " <"); k >= 0 {
			name = name[:k]
		}
		m := strings.Index(raw, "<|message|>")
		if name == "" || m < 0 {
			continue
		}
		raw = raw[m+len("<|message|>"):]
		args := raw
		for _, end := range []string{"<|call|>", "<|end|>", "<|start|>"} {
			if k := strings.Index(args, end); k >= 0 {
				args = args[:k]
			}
		}
		raw = raw[len(args):]
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		var tc toolCall
		tc.ID, tc.Type = newID("call_"), "function"
		tc.Function.Name, tc.Function.Arguments = name, args
		calls = append(calls, tc)
	}
}

func parseToolCall(body string) (toolCall, bool) {
	var c struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &c); err != nil || c.Name == "" {
		return toolCall{}, false
	}
	args := strings.TrimSpace(string(c.Arguments))
	switch {
	case args == "" || args == "null":
		args = "{}"
	case args[0] == '"': // some models write the arguments as a JSON string
		var s string
		if json.Unmarshal(c.Arguments, &s) != nil {
			return toolCall{}, false
		}
		args = s
	}
	var tc toolCall
	tc.ID, tc.Type = newID("call_"), "function"
	tc.Function.Name, tc.Function.Arguments = c.Name, args
	return tc, true
}
