package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"strata/engine"
)

// Backend is the model the server talks to. Local serves an *engine.Model; the app hands
// the server its own loaded model, so there is one copy of the weights in memory. The
// server calls a Backend from one request at a time.
type Backend interface {
	ModelID() string
	// ChatTemplate is the template Chat renders with; the server reads it to know whether
	// the model takes tools and how it writes its calls.
	ChatTemplate() string
	ContextLength() int
	// Detokenize is generated ids as text, special tokens spelled out (gpt-oss's tool
	// calls are read from it).
	Detokenize(ids []int) string
	Chat(ctx context.Context, in ChatInput, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error)
	Complete(ctx context.Context, prompt string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error)
}

// ChatInput is a chat request in the engine's terms.
type ChatInput struct {
	Messages []engine.Message
	Tools    []string // function definitions as JSON objects; nil for none
	Thinking *bool    // enable_thinking for templates that take it; nil = the template's default
}

// Local is a Backend over an opened engine model. It keeps a session per thinking setting
// (they share the model's one KV cache), so a client that resends a conversation with one
// more turn reuses the cached prefix. The server calls it from one request at a time.
type Local struct {
	m        *engine.Model
	id       string
	policy   engine.ContextPolicy
	sessions map[string]*engine.Session
}

// NewLocal serves m under the model id its file name gives ("qwen3-30b-a3b-q4_k_m");
// policy is what a conversation longer than the context gets (the app's and strata chat's
// setting): stop answers 400 context_length_exceeded, drop-oldest leaves out the oldest turns.
func NewLocal(m *engine.Model, policy engine.ContextPolicy) *Local {
	return &Local{m: m, id: ModelID(m.Info().Path), policy: policy, sessions: map[string]*engine.Session{}}
}

func (l *Local) session(thinking *bool) *engine.Session {
	key := "default"
	if thinking != nil {
		key = fmt.Sprint(*thinking)
	}
	s := l.sessions[key]
	if s == nil {
		s = l.m.NewSession(engine.SessionOptions{EnableThinking: thinking, ContextPolicy: l.policy})
		l.sessions[key] = s
	}
	return s
}

// ModelID is the id a model file is served under: its base name without ".gguf".
func ModelID(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// ModelID implements Backend.
func (l *Local) ModelID() string { return l.id }

// ChatTemplate implements Backend.
func (l *Local) ChatTemplate() string { return l.m.ChatTemplate() }

// Detokenize implements Backend.
func (l *Local) Detokenize(ids []int) string { return l.m.Detokenize(ids) }

// ContextLength implements Backend.
func (l *Local) ContextLength() int { return l.m.Config().MaxContext }

// Chat implements Backend.
func (l *Local) Chat(ctx context.Context, in ChatInput, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	return l.session(in.Thinking).ChatWithTools(ctx, in.Messages, in.Tools, sp, onToken)
}

// Complete implements Backend: the prompt is plain text (special-token spellings stay text).
func (l *Local) Complete(ctx context.Context, prompt string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	ids := l.m.Tokenize(prompt, false)
	if len(ids) == 0 {
		return engine.Result{}, errNoTokens
	}
	return l.session(nil).Generate(ctx, ids, sp, onToken)
}

var errNoTokens = errors.New("the prompt gives no tokens in this model's vocabulary")
