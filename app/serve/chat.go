package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"strata/engine"
)

// knobs are the sampling fields chat and completion requests share.
type knobs struct {
	MaxTokens     *int
	Temperature   *float64
	TopP          *float64
	TopK          *int
	MinP          *float64
	RepeatPenalty *float64
	Seed          *int64
	N             *int
}

// sampling checks the knobs and maps them onto the engine's. It returns the offending
// parameter's name with the error.
func (k knobs) sampling(now time.Time) (engine.Sampling, string, error) {
	sp := engine.Sampling{Temperature: 1, Seed: uint64(now.UnixNano())}
	if k.N != nil && *k.N != 1 {
		return sp, "n", fmt.Errorf("n is %d; this server writes one choice per request", *k.N)
	}
	if k.MaxTokens != nil {
		if *k.MaxTokens < 1 {
			return sp, "max_tokens", fmt.Errorf("max_tokens is %d; it must be at least 1", *k.MaxTokens)
		}
		sp.MaxTokens = *k.MaxTokens
	}
	if k.Temperature != nil {
		if *k.Temperature < 0 || *k.Temperature > 2 {
			return sp, "temperature", fmt.Errorf("temperature is %g; it must be between 0 and 2", *k.Temperature)
		}
		sp.Temperature = float32(*k.Temperature)
	}
	if k.TopP != nil {
		if *k.TopP <= 0 || *k.TopP > 1 {
			return sp, "top_p", fmt.Errorf("top_p is %g; it must be above 0 and at most 1", *k.TopP)
		}
		sp.TopP = float32(*k.TopP)
	}
	if k.TopK != nil {
		if *k.TopK < 0 {
			return sp, "top_k", fmt.Errorf("top_k is %d; it must be 0 (off) or more", *k.TopK)
		}
		sp.TopK = *k.TopK
	}
	if k.MinP != nil {
		if *k.MinP < 0 || *k.MinP > 1 {
			return sp, "min_p", fmt.Errorf("min_p is %g; it must be between 0 and 1", *k.MinP)
		}
		sp.MinP = float32(*k.MinP)
	}
	if k.RepeatPenalty != nil {
		if *k.RepeatPenalty <= 0 {
			return sp, "repeat_penalty", fmt.Errorf("repeat_penalty is %g; it must be above 0", *k.RepeatPenalty)
		}
		sp.RepeatPenalty = float32(*k.RepeatPenalty)
	}
	if k.Seed != nil {
		sp.Seed = uint64(*k.Seed)
	}
	return sp, "", nil
}

func refuseNonZero(v *float64, name string) error {
	if v != nil && *v != 0 {
		return fmt.Errorf("%s is not supported by this server (send 0 or leave it out)", name)
	}
	return nil
}

// chatInput is a validated chat request in the engine's terms.
type chatInput struct {
	ChatInput
	calls string // the tool-call format to parse out of the answer (callsNone: none)
}

func (s *Server) chatInput(w http.ResponseWriter, req *chatRequest, b Backend) (chatInput, bool) {
	var in chatInput
	fail := func(param, format string, args ...any) (chatInput, bool) {
		badRequest(w, param, fmt.Sprintf(format, args...))
		return chatInput{}, false
	}
	if len(req.Messages) == 0 {
		return fail("messages", "messages is empty; send at least one message")
	}
	if req.Logprobs != nil && *req.Logprobs || req.TopLogprobs != nil {
		return fail("logprobs", "logprobs are not supported by this server")
	}
	if err := refuseNonZero(req.PresencePenalty, "presence_penalty"); err != nil {
		return fail("presence_penalty", "%v", err)
	}
	if err := refuseNonZero(req.FrequencyPenalty, "frequency_penalty"); err != nil {
		return fail("frequency_penalty", "%v", err)
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text" {
		return fail("response_format", "response_format %q is not supported by this server (only text)", req.ResponseFormat.Type)
	}
	if req.ReasoningEffort != "" {
		return fail("reasoning_effort", "reasoning_effort is not supported by this server")
	}
	names := map[string]string{} // tool_call_id -> function name
	for i, m := range req.Messages {
		text, err := messageText(m.Content)
		if err != nil {
			return fail(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %v", i, err)
		}
		em := engine.Message{Content: text}
		switch m.Role {
		case "system", "developer":
			em.Role = engine.RoleSystem
		case "user":
			em.Role = engine.RoleUser
		case "assistant":
			em.Role, em.Thinking = engine.RoleAssistant, m.ReasoningContent
			for j, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return fail(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), "messages[%d].tool_calls[%d] has no function name", i, j)
				}
				if a := strings.TrimSpace(c.Function.Arguments); a != "" && !json.Valid([]byte(a)) {
					return fail(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), "messages[%d].tool_calls[%d].function.arguments is not JSON", i, j)
				}
				names[c.ID] = c.Function.Name
				em.ToolCalls = append(em.ToolCalls, engine.ToolCall{Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
		case "tool":
			em.Role, em.ToolName = engine.RoleTool, m.Name
			if em.ToolName == "" {
				em.ToolName = names[m.ToolCallID]
			}
		case "":
			return fail(fmt.Sprintf("messages[%d].role", i), "messages[%d] has no role", i)
		default:
			return fail(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q: use system, developer, user, assistant or tool", i, m.Role)
		}
		in.Messages = append(in.Messages, em)
	}
	for k, v := range req.ChatTemplateKwargs {
		var on bool
		if k != "enable_thinking" || json.Unmarshal(v, &on) != nil {
			return fail("chat_template_kwargs", "chat_template_kwargs: only enable_thinking (true or false) is supported, not %s=%s", k, v)
		}
		in.Thinking = &on
	}
	choice := strings.TrimSpace(string(req.ToolChoice))
	switch choice {
	case "", "null", `"auto"`, `"none"`:
	default:
		return fail("tool_choice", "tool_choice %s is not supported by this server (auto or none)", choice)
	}
	if len(req.Tools) > 0 && choice != `"none"` {
		tmpl := b.ChatTemplate()
		if callFormat(tmpl) == callsNone {
			return fail("tools", "model %q's chat template does not take tools in a format this server reads back", b.ModelID())
		}
		for i, t := range req.Tools {
			if t.Type != "function" || t.Function.Name == "" {
				return fail(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i)
			}
			if p := strings.TrimSpace(string(t.Function.Parameters)); p != "" && p != "null" && !strings.HasPrefix(p, "{") {
				return fail(fmt.Sprintf("tools[%d].function.parameters", i), "tools[%d].function.parameters must be a JSON schema object", i)
			}
			raw, err := json.Marshal(t)
			if err != nil {
				return fail(fmt.Sprintf("tools[%d]", i), "tools[%d]: %v", i, err)
			}
			in.Tools = append(in.Tools, string(raw))
		}
		in.calls = callFormat(tmpl)
	}
	return in, true
}

// answer is what one generation produced, after stop sequences and tool calls.
type answer struct {
	content, reasoning string
	calls              []toolCall
	res                engine.Result
	stopHit            bool
}

func (a answer) finishReason() string {
	switch {
	case len(a.calls) > 0:
		return "tool_calls"
	case a.stopHit:
		return "stop"
	case a.res.Stop == engine.StopMaxTokens || a.res.Stop == engine.StopContext:
		return "length"
	}
	return "stop"
}

func (a answer) usage() *usage {
	u := &usage{PromptTokens: a.res.Timings.PromptTokens + a.res.Timings.CachedTokens, CompletionTokens: a.res.Timings.GeneratedTokens}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = a.res.Timings.CachedTokens
	return u
}

// generate runs one generation through the stop filter and the tool-call hold; emit (may
// be nil) gets each piece of answer and reasoning text as it becomes safe to send.
func generate(ctx context.Context, stops []string, calls string, detok func([]int) string, emit func(content, reasoning string),
	run func(ctx context.Context, onToken func(engine.Token)) (engine.Result, error)) (answer, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := &stopFilter{stops: stops}
	hold := &toolHold{format: calls}
	var a answer
	var content, reasoning strings.Builder
	send := func(c, r string) {
		content.WriteString(c)
		reasoning.WriteString(r)
		if emit != nil && (c != "" || r != "") {
			emit(c, r)
		}
	}
	onToken := func(t engine.Token) {
		if t.Thinking {
			if !stop.hit {
				send("", t.Text)
			}
			return
		}
		out, hit := stop.feed(t.Text)
		send(hold.feed(out), "")
		if hit && !a.stopHit {
			a.stopHit = true
			cancel()
		}
	}
	res, err := run(ctx, onToken)
	a.res = res
	if err != nil {
		return a, err
	}
	if !a.stopHit {
		send(hold.feed(stop.flush()), "")
	}
	var rest string
	raw := ""
	if calls == callsHarmony {
		raw = detok(res.Tokens)
	}
	a.calls, rest = hold.finish(raw)
	send(rest, "")
	a.content, a.reasoning = content.String(), reasoning.String()
	if len(a.calls) > 0 {
		a.content = strings.TrimSpace(a.content) // the space before the call is layout
	}
	return a, nil
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !s.decode(w, r, &req) {
		return
	}
	b := s.backendFor(w, req.Model)
	if b == nil {
		return
	}
	in, ok := s.chatInput(w, &req, b)
	if !ok {
		return
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	sp, stops, ctx, end, ok := s.prepare(w, r, b, knobs{maxTokens, req.Temperature, req.TopP, req.TopK, req.MinP, req.RepeatPenalty, req.Seed, req.N}, req.Stop)
	if !ok {
		return
	}
	defer end()

	base := chatResponse{ID: newID("chatcmpl-"), Object: "chat.completion", Created: s.opts.Now().Unix(), Model: b.ModelID(), SystemFingerprint: "strata"}
	run := func(ctx context.Context, onToken func(engine.Token)) (engine.Result, error) {
		return b.Chat(ctx, in.ChatInput, sp, onToken)
	}
	if !req.Stream {
		a, err := generate(ctx, stops, in.calls, b.Detokenize, nil, run)
		if ended(ctx, w, r, nil, a, err) {
			return
		}
		msg := &outMessage{Role: "assistant", ReasoningContent: a.reasoning, ToolCalls: a.calls}
		if a.content != "" || len(a.calls) == 0 {
			msg.Content = &a.content
		}
		fr := a.finishReason()
		base.Choices = []chatChoice{{Message: msg, FinishReason: &fr}}
		base.Usage = a.usage()
		writeJSON(w, http.StatusOK, base)
		return
	}

	ev := newEvents(w)
	base.Object = "chat.completion.chunk"
	chunk := func(delta *outMessage, finish *string) chatResponse {
		c := base
		c.Choices = []chatChoice{{Delta: delta, FinishReason: finish}}
		return c
	}
	first := true
	emit := func(content, reasoning string) {
		d := &outMessage{ReasoningContent: reasoning}
		if first {
			d.Role, first = "assistant", false
		}
		if content != "" {
			d.Content = &content
		}
		ev.send(chunk(d, nil))
	}
	a, err := generate(ctx, stops, in.calls, b.Detokenize, emit, run)
	if ended(ctx, w, r, ev, a, err) {
		return
	}
	if first {
		ev.send(chunk(&outMessage{Role: "assistant"}, nil))
	}
	if len(a.calls) > 0 {
		calls := make([]toolCall, len(a.calls))
		for i, c := range a.calls {
			calls[i] = c
			calls[i].Index = &i
		}
		ev.send(chunk(&outMessage{ToolCalls: calls}, nil))
	}
	fr := a.finishReason()
	ev.send(chunk(&outMessage{}, &fr))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := base
		c.Choices = []chatChoice{}
		c.Usage = a.usage()
		ev.send(c)
	}
	ev.finish()
}

// prepare checks the sampling knobs and stop list that chat and completion requests share,
// then waits for the engine's turn (see begin). When ok is false the client has been
// answered (or has left); otherwise end gives the turn back.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, b Backend, k knobs, stop json.RawMessage) (sp engine.Sampling, stops []string, ctx context.Context, end func(), ok bool) {
	sp, param, err := k.sampling(s.opts.Now())
	if err != nil {
		badRequest(w, param, err.Error())
		return sp, nil, nil, nil, false
	}
	stops, err = stopList(stop)
	if err != nil {
		badRequest(w, "stop", err.Error())
		return sp, nil, nil, nil, false
	}
	ctx, end, ok = s.begin(w, r, b)
	return sp, stops, ctx, end, ok
}

// ended tells whether a request is over once its generation returned, answering the
// failure itself: an error becomes a JSON error while nothing was streamed and an error
// event after; an interruption by the server (not by a stop string) is answered as one
// too, as JSON when not streaming (ev nil) and as an event when streaming; a client that
// left gets nothing.
func ended(ctx context.Context, w http.ResponseWriter, r *http.Request, ev *events, a answer, err error) bool {
	switch {
	case err != nil:
		if ev == nil || !ev.started {
			engineError(w, err)
		} else {
			ev.sendError(err)
		}
	case r.Context().Err() != nil:
		// the client left
	case ctx.Err() != nil && !a.stopHit:
		if ev == nil {
			engineError(w, errInterrupted)
		} else {
			ev.sendError(errInterrupted)
		}
	default:
		return false
	}
	return true
}

// engineError answers a generation that failed before it streamed anything.
func engineError(w http.ResponseWriter, err error) {
	status, typ, code := classify(err)
	writeError(w, status, typ, code, err.Error())
}

// classify tells the client's mistakes (a prompt over the context, a conversation the
// template refuses, tool-call arguments that are not JSON) from the server's.
func classify(err error) (status int, typ, code string) {
	msg := err.Error()
	switch {
	case errors.Is(err, errInterrupted):
		return http.StatusServiceUnavailable, "server_error", "model_unloaded"
	case errors.Is(err, engine.ErrContextFull), strings.Contains(msg, "but the context holds"):
		return http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
	case strings.Contains(msg, "chat template"), strings.Contains(msg, "engine: message "), strings.Contains(msg, "engine: tool "), err == errNoTokens:
		return http.StatusBadRequest, "invalid_request_error", "invalid_value"
	}
	return http.StatusInternalServerError, "server_error", "engine_error"
}

// events writes server-sent events, starting the response at the first one.
type events struct {
	w       http.ResponseWriter
	started bool
}

func newEvents(w http.ResponseWriter) *events { return &events{w: w} }

func (e *events) start() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
}

func (e *events) write(data []byte) {
	e.start()
	// A failed write means the client left; the request's context ends the generation.
	_, _ = e.w.Write([]byte("data: "))
	_, _ = e.w.Write(data)
	_, _ = e.w.Write([]byte("\n\n"))
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *events) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	e.write(b)
}

func (e *events) sendError(err error) {
	_, typ, code := classify(err)
	e.send(map[string]apiError{"error": {Message: err.Error(), Type: typ, Code: code}})
}

func (e *events) finish() { e.write([]byte("[DONE]")) }
