package serve

import (
	"context"
	"errors"
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
	Chat(ctx context.Context, msgs []engine.Message, tools []string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error)
	Complete(ctx context.Context, prompt string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error)
}

// Local is a Backend over an opened engine model. It keeps one session, so a client that
// resends a conversation with one more turn reuses the cached prefix.
type Local struct {
	m    *engine.Model
	id   string
	sess *engine.Session
}

// NewLocal serves m under the model id its file name gives ("qwen3-30b-a3b-q4_k_m").
func NewLocal(m *engine.Model) *Local {
	return &Local{m: m, id: ModelID(m.Info().Path), sess: m.NewSession(engine.SessionOptions{})}
}

// ModelID is the id a model file is served under: its base name without ".gguf".
func ModelID(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// ModelID implements Backend.
func (l *Local) ModelID() string { return l.id }

// ChatTemplate implements Backend.
func (l *Local) ChatTemplate() string { return l.m.ChatTemplate() }

// ContextLength implements Backend.
func (l *Local) ContextLength() int { return l.m.Config().MaxContext }

// Chat implements Backend.
func (l *Local) Chat(ctx context.Context, msgs []engine.Message, tools []string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	return l.sess.ChatWithTools(ctx, msgs, tools, sp, onToken)
}

// Complete implements Backend: the prompt is plain text (special-token spellings stay text).
func (l *Local) Complete(ctx context.Context, prompt string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	ids := l.m.Tokenize(prompt, false)
	if len(ids) == 0 {
		return engine.Result{}, errNoTokens
	}
	return l.sess.Generate(ctx, ids, sp, onToken)
}

var errNoTokens = errors.New("the prompt gives no tokens in this model's vocabulary")
