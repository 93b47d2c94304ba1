package engine

import (
	"context"
	"errors"
)

// errNotBuilt is returned while the engine is being assembled.
var errNotBuilt = errors.New("engine: not built yet")

// Model is an opened GGUF model with its weights placed on the backends. It is safe for
// one Session to generate at a time; Tiers may be called from any goroutine.
type Model struct {
	info ModelInfo
	cfg  Config
}

// Open maps the model file, checks it, places the weights and returns when the first token
// can be generated. onProgress (may be nil) is called from the loading goroutine.
func Open(ctx context.Context, path string, cfg Config, onProgress func(Progress)) (*Model, error) {
	return nil, errNotBuilt
}

// Close releases the model's memory and files.
func (m *Model) Close() error { return nil }

// Info describes the model.
func (m *Model) Info() ModelInfo { return m.info }

// Config is the configuration the model was opened with, with automatic values resolved.
func (m *Model) Config() Config { return m.cfg }

// Tiers returns a snapshot of where the experts are and how often they were hit.
func (m *Model) Tiers() TierSnapshot { return TierSnapshot{} }

// Session is one conversation's state (its KV cache).
type Session struct {
	m    *Model
	opts SessionOptions
}

// NewSession starts an empty conversation.
func (m *Model) NewSession(opts SessionOptions) *Session { return &Session{m: m, opts: opts} }

// Chat renders the conversation with the model's chat template, generates the assistant's
// answer and streams it through onToken (may be nil). The KV cache is reused for the prefix
// the conversation shares with the previous call.
func (s *Session) Chat(ctx context.Context, msgs []Message, sp Sampling, onToken func(Token)) (Result, error) {
	return Result{}, errNotBuilt
}

// Generate continues raw prompt tokens.
func (s *Session) Generate(ctx context.Context, prompt []int, sp Sampling, onToken func(Token)) (Result, error) {
	return Result{}, errNotBuilt
}

// Eval runs tokens from an empty cache and hands the logits of every position to fn.
func (s *Session) Eval(ctx context.Context, tokens []int, fn func(pos int, logits []float32)) error {
	return errNotBuilt
}
