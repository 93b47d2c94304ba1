package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"strata/engine/gguf"
	"strata/engine/tokenizer"
	"strata/engine/tokenizer/chattmpl"
)

// textCodec turns chats into tokens and tokens into text for one model.
type textCodec struct {
	tok      *tokenizer.Tokenizer
	arch     string
	template string
	warning  string // why the model's own template is not used, if it is not
}

func newTextCodec(f *gguf.File) (*textCodec, error) {
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: tokenizer: %w", f.Path, err)
	}
	c := &textCodec{tok: tok, arch: f.Architecture()}
	c.template, c.warning = tokenizer.TemplateFor(c.arch, tok.ChatTemplate())
	if c.warning != "" {
		slog.Warn("engine: chat template", "path", f.Path, "warning", c.warning)
	}
	return c, nil
}

func (c *textCodec) isEnd(id int) bool { return c.tok.IsEndOfGeneration(id) }

type textStream struct{ s *tokenizer.Stream }

func (c *textCodec) newStream() textStream { return textStream{c.tok.NewStream()} }
func (t textStream) add(id int) string     { return t.s.Add(id) }
func (t textStream) flush() string         { return t.s.Flush() }

// Tokenize encodes text; special makes written special tokens (<|im_start|>) single ids.
func (m *Model) Tokenize(text string, special bool) []int { return m.text.tok.Encode(text, special) }

// Detokenize decodes ids to text.
func (m *Model) Detokenize(ids []int) string { return m.text.tok.Decode(ids) }

// TemplateWarning is non-empty when the model's chat template could not be used and a
// built-in one stands in; the app shows it.
func (m *Model) TemplateWarning() string { return m.text.warning }

// reasoningFilter splits streamed text into thinking and answer parts; a nil filter passes
// everything through as answer.
type reasoningFilter struct{ s *tokenizer.ReasoningSplitter }

type textPart struct {
	text     string
	thinking bool
}

func (f *reasoningFilter) feed(text string) []textPart {
	if f == nil {
		return []textPart{{text: text}}
	}
	th, ans := f.s.Feed(text)
	return []textPart{{text: th, thinking: true}, {text: ans}}
}

func (f *reasoningFilter) flush() []textPart {
	if f == nil {
		return nil
	}
	th, ans := f.s.Flush()
	return []textPart{{text: th, thinking: true}, {text: ans}}
}

// Chat renders the conversation with the model's chat template, generates the assistant's
// answer and streams it through onToken (may be nil). The KV cache is reused for the prefix
// the conversation shares with the previous call.
func (s *Session) Chat(ctx context.Context, msgs []Message, sp Sampling, onToken func(Token)) (Result, error) {
	return s.ChatWithTools(ctx, msgs, nil, sp, onToken)
}

// ChatWithTools is Chat with function definitions for the template's tools variable: each
// one a JSON object as OpenAI's API writes it ({"type": "function", "function": {...}}).
// The model's calls come back as text in the template's own format (see ChatTemplate).
func (s *Session) ChatWithTools(ctx context.Context, msgs []Message, tools []string, sp Sampling, onToken func(Token)) (Result, error) {
	c := s.m.text
	ids, dropped, err := s.fitContext(msgs, tools, sp)
	if err != nil {
		return Result{}, err
	}
	split := &reasoningFilter{tokenizer.NewReasoningSplitter(tokenizer.ReasoningStyle(c.template, c.tok))}
	res, err := s.generate(ctx, ids, sp, onToken, split)
	res.Dropped = dropped
	return res, err
}

// fitContext renders msgs and applies the session's ContextPolicy when they do not fit the
// context with room for an answer (Sampling.MaxTokens, else a quarter of the context, at
// most half): stop refuses with ErrContextFull; drop-oldest leaves out the oldest messages
// after the leading system ones, one at a time, and returns how many it left out. A
// conversation that fits with less room still runs, and stops with StopContext when full.
func (s *Session) fitContext(msgs []Message, tools []string, sp Sampling) ([]int, int, error) {
	c := s.m.text
	capacity := s.m.cfg.MaxContext
	room := capacity / 4
	if sp.MaxTokens > 0 {
		room = sp.MaxTokens
	}
	room = min(room, capacity/2)
	sys := 0
	for sys < len(msgs) && msgs[sys].Role == RoleSystem {
		sys++
	}
	for dropped := 0; ; dropped++ {
		kept := append(append([]Message(nil), msgs[:sys]...), msgs[sys+dropped:]...)
		ids, err := c.chatTokens(kept, tools, s.opts.EnableThinking, true)
		if err != nil {
			return nil, 0, fmt.Errorf("engine: %w", err)
		}
		switch {
		case capacity <= 0 || len(ids)+room <= capacity:
			return ids, dropped, nil
		case s.opts.ContextPolicy != ContextDropOldest && len(ids) < capacity:
			return ids, 0, nil // it fits, with less room: the answer may stop at StopContext
		case s.opts.ContextPolicy != ContextDropOldest:
			return nil, 0, fmt.Errorf("engine: %w: the conversation is %d tokens and the context holds %d; start a new chat, or choose to drop the oldest turns (--context-full drop-oldest), or raise --max-context", ErrContextFull, len(ids), capacity)
		case sys+dropped >= len(msgs)-1:
			if len(ids) < capacity {
				return ids, dropped, nil // only the newest message is left: run it with what room there is
			}
			return nil, 0, fmt.Errorf("engine: %w: the newest message alone is %d tokens and the context holds %d; shorten it or raise --max-context", ErrContextFull, len(ids), capacity)
		}
	}
}

// chatTokens renders msgs with the model's chat template (as Session.Chat does) and encodes
// them. thinking nil leaves the template's default.
func (c *textCodec) chatTokens(msgs []Message, tools []string, thinking *bool, addGenerationPrompt bool) ([]int, error) {
	tm := make([]tokenizer.ChatMessage, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.ChatMessage{Role: string(m.Role), Content: m.Content, Thinking: m.Thinking, Name: m.ToolName}
		for j, call := range m.ToolCalls {
			args, err := jsonObject(call.Arguments)
			if err != nil {
				return nil, fmt.Errorf("message %d: tool call %d (%s): arguments: %w", i, j, call.Name, err)
			}
			tm[i].ToolCalls = append(tm[i].ToolCalls, tokenizer.ToolCall{Name: call.Name, Arguments: args})
		}
	}
	opts := tokenizer.RenderOptions{AddGenerationPrompt: addGenerationPrompt, BOS: c.tok.BOSText(), EOS: c.tok.EOSText()}
	for i, t := range tools {
		v, err := jsonObject(t)
		if err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
		opts.Tools = append(opts.Tools, v)
	}
	if thinking != nil {
		opts.Kwargs = map[string]any{"enable_thinking": *thinking}
	}
	prompt, err := tokenizer.RenderChat(c.template, tm, opts)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	ids := c.tok.Encode(prompt, true)
	if c.tok.AddBOS() {
		if bos, ok := c.tok.BOS(); ok && (len(ids) == 0 || ids[0] != bos) {
			ids = append([]int{bos}, ids...)
		}
	}
	return ids, nil
}

// jsonObject decodes a JSON object keeping its key order, as templates' tojson prints it.
func jsonObject(text string) (*chattmpl.Object, error) {
	if strings.TrimSpace(text) == "" {
		return chattmpl.NewObject(), nil
	}
	v, err := chattmpl.DecodeJSONBytes([]byte(text))
	if err != nil {
		return nil, err
	}
	o, ok := v.(*chattmpl.Object)
	if !ok {
		return nil, fmt.Errorf("not a JSON object: %.40q", text)
	}
	return o, nil
}

// ChatTemplate is the Jinja chat template Chat renders with (the model's own, or the
// built-in one that stands in for it); callers read it to know how tool calls are written.
func (m *Model) ChatTemplate() string { return m.text.template }
