package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"strata/engine"
)

// promptText reads "prompt": a string or an array of one string.
func promptText(raw json.RawMessage) (string, bool) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "", false
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, true
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		return list[0], true
	}
	return "", false
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if !s.decode(w, r, &req) {
		return
	}
	b := s.backendFor(w, req.Model)
	if b == nil {
		return
	}
	prompt, ok := promptText(req.Prompt)
	switch {
	case !ok:
		badRequest(w, "prompt", "prompt must be a string (or an array of one string)")
		return
	case prompt == "":
		badRequest(w, "prompt", "prompt is empty")
		return
	case req.Echo || req.Suffix != "" || req.Logprobs != nil || req.BestOf != nil && *req.BestOf != 1:
		badRequest(w, "echo", "echo, suffix, logprobs and best_of are not supported by this server")
		return
	}
	if err := refuseNonZero(req.PresencePenalty, "presence_penalty"); err != nil {
		badRequest(w, "presence_penalty", err.Error())
		return
	}
	if err := refuseNonZero(req.FrequencyPenalty, "frequency_penalty"); err != nil {
		badRequest(w, "frequency_penalty", err.Error())
		return
	}
	maxTokens := req.MaxTokens
	if maxTokens == nil {
		n := 16 // OpenAI's default for completions
		maxTokens = &n
	}
	sp, stops, ctx, end, ok := s.prepare(w, r, b, knobs{maxTokens, req.Temperature, req.TopP, req.TopK, req.MinP, req.RepeatPenalty, req.Seed, req.N}, req.Stop)
	if !ok {
		return
	}
	defer end()

	base := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: s.opts.Now().Unix(), Model: b.ModelID(), SystemFingerprint: "strata"}
	run := func(ctx context.Context, onToken func(engine.Token)) (engine.Result, error) {
		return b.Complete(ctx, prompt, sp, onToken)
	}
	if !req.Stream {
		a, err := generate(ctx, stops, callsNone, nil, nil, run)
		if ended(ctx, w, r, nil, a, err) {
			return
		}
		fr := a.finishReason()
		base.Choices = []textChoice{{Text: a.content, FinishReason: &fr}}
		base.Usage = a.usage()
		writeJSON(w, http.StatusOK, base)
		return
	}
	ev := newEvents(w)
	emit := func(content, _ string) {
		c := base
		c.Choices = []textChoice{{Text: content}}
		ev.send(c)
	}
	a, err := generate(ctx, stops, callsNone, nil, emit, run)
	if ended(ctx, w, r, ev, a, err) {
		return
	}
	fr := a.finishReason()
	c := base
	c.Choices = []textChoice{{FinishReason: &fr}}
	ev.send(c)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := base
		c.Choices = []textChoice{}
		c.Usage = a.usage()
		ev.send(c)
	}
	ev.finish()
}
