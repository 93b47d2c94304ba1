package serve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"strata/app/serve"
	"strata/engine"
	"strata/engine/quant"
	"strata/engine/synth"
)

// tinyModel writes and opens the smallest synthetic model: the server's behaviour, not the
// answers' quality, is under test.
func tinyModel(t *testing.T) *engine.Model {
	t.Helper()
	return tinyModelWithContext(t, 2048)
}

// tinyModelWithContext is tinyModel with a context of maxContext tokens.
func tinyModelWithContext(t *testing.T, maxContext int) *engine.Model {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant = quant.Q8_0
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 1, maxContext
	m, err := engine.Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// watched is a Backend that counts the generations running at once and reports each
// result, so tests can see the queue and cancellation from the engine's side.
// It also ignores the model's end-of-turn tokens: the synthetic model's random weights may
// pick one at any step (a change of synth's weights did), and these tests are about the
// server's own cuts (max_tokens, stop strings, cancellation), not the model's.
type watched struct {
	*serve.Local
	running, most atomic.Int32
	results       chan engine.Result
}

// Complete implements serve.Backend, ignoring end-of-turn tokens as Chat does.
func (w *watched) Complete(ctx context.Context, prompt string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	sp.IgnoreEOS = true
	return w.Local.Complete(ctx, prompt, sp, onToken)
}

func (w *watched) Chat(ctx context.Context, in serve.ChatInput, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	n := w.running.Add(1)
	defer w.running.Add(-1)
	for {
		m := w.most.Load()
		if n <= m || w.most.CompareAndSwap(m, n) {
			break
		}
	}
	sp.IgnoreEOS = true
	res, err := w.Local.Chat(ctx, in, sp, onToken)
	select {
	case w.results <- res:
	default:
	}
	return res, err
}

type fixture struct {
	api     *serve.Server
	url     string
	backend *watched
	client  openai.Client
	model   string
}

func newFixture(t *testing.T, key string) *fixture {
	t.Helper()
	b := &watched{Local: serve.NewLocal(tinyModel(t), engine.ContextStop), results: make(chan engine.Result, 16)}
	api := serve.New(func() serve.Backend { return b }, serve.Options{APIKey: key, MaxBodyBytes: 64 << 10})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &fixture{api: api, url: srv.URL, backend: b, client: c, model: b.ModelID()}
}

func (f *fixture) params(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       f.model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage(prompt)},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
		Seed:        openai.Int(7),
	}
}

func (f *fixture) stream(t *testing.T, ctx context.Context, p openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, int) {
	t.Helper()
	s := f.client.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for s.Next() {
		acc.AddChunk(s.Current())
		chunks++
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc, chunks
}

func TestSDKChat(t *testing.T) {
	f := newFixture(t, "sk-test")
	ctx := context.Background()

	models, err := f.client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "tiny" {
		t.Fatalf("models: %+v, want one, \"tiny\"", models.Data)
	}

	const n = 24
	full, err := f.client.Chat.Completions.New(ctx, f.params("Hello there", n))
	if err != nil {
		t.Fatal(err)
	}
	answer := full.Choices[0].Message.Content
	if full.Choices[0].FinishReason != "length" || full.Usage.CompletionTokens != n || full.Usage.PromptTokens < 5 || answer == "" {
		t.Fatalf("chat: finish %q, usage %+v, content %q: want %d tokens cut by length", full.Choices[0].FinishReason, full.Usage, answer, n)
	}

	t.Run("streaming", func(t *testing.T) {
		p := f.params("Hello there", n)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		acc, chunks := f.stream(t, ctx, p)
		if got := acc.Choices[0].Message.Content; got != answer {
			t.Errorf("streamed %q, want the unstreamed answer %q", got, answer)
		}
		if chunks < 3 || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != n {
			t.Errorf("%d chunks, finish %q, usage %+v", chunks, acc.Choices[0].FinishReason, acc.Usage)
		}
	})

	// A stop sequence taken from the middle of the greedy answer ends it just before.
	runes := []rune(answer)
	stop := string(runes[len(runes)/2 : len(runes)/2+2])
	want := answer[:strings.Index(answer, stop)]
	t.Run("stop", func(t *testing.T) {
		p := f.params("Hello there", n)
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"never-said", stop}}
		res, err := f.client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Choices[0].Message.Content; got != want || res.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: got %q (%s), want %q (stop)", stop, got, res.Choices[0].FinishReason, want)
		}
		if res.Usage.CompletionTokens >= n {
			t.Errorf("generated %d tokens: the stop sequence did not end the generation", res.Usage.CompletionTokens)
		}
		acc, _ := f.stream(t, ctx, p)
		if got := acc.Choices[0].Message.Content; got != want || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("streamed with stop %q: got %q (%s), want %q", stop, got, acc.Choices[0].FinishReason, want)
		}
	})

	t.Run("completions", func(t *testing.T) {
		p := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(f.model), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(6), Temperature: openai.Float(0)}
		res, err := f.client.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Text == "" || res.Usage.CompletionTokens != 6 || res.Choices[0].FinishReason != "length" {
			t.Errorf("completion %+v, usage %+v", res.Choices[0], res.Usage)
		}
		s := f.client.Completions.NewStreaming(ctx, p)
		var text strings.Builder
		for s.Next() {
			for _, c := range s.Current().Choices {
				text.WriteString(c.Text)
			}
		}
		if err := s.Err(); err != nil || text.String() != res.Choices[0].Text {
			t.Errorf("streamed completion %q (%v), want %q", text.String(), err, res.Choices[0].Text)
		}
	})
}

// A client that goes away stops its generation at once, and the next request is served.
func TestSDKCancel(t *testing.T) {
	f := newFixture(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	p := f.params("Tell me a long story", 1500)
	s := f.client.Chat.Completions.NewStreaming(ctx, p)
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	cancel()
	for s.Next() {
	}
	select {
	case res := <-f.backend.results:
		if res.Stop != engine.StopCancelled || res.Timings.GeneratedTokens >= 1500 {
			t.Errorf("after the client left: stop %q after %d tokens, want cancelled early", res.Stop, res.Timings.GeneratedTokens)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the generation did not end after its client left")
	}
	res, err := f.client.Chat.Completions.New(context.Background(), f.params("Hi", 3))
	if err != nil || res.Usage.CompletionTokens != 3 {
		t.Fatalf("the next request: %v, %+v", err, res)
	}
}

// Requests sent at once all get answers, one generation at a time.
func TestSDKQueue(t *testing.T) {
	f := newFixture(t, "")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.client.Chat.Completions.New(context.Background(), f.params(strings.Repeat("go ", i+1), 12))
			if err == nil && (res.Usage.CompletionTokens < 1 || res.Usage.CompletionTokens > 12) {
				err = fmt.Errorf("request %d: %d tokens, want 1 to 12", i, res.Usage.CompletionTokens)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if m := f.backend.most.Load(); m != 1 {
		t.Errorf("%d generations ran at once, want 1", m)
	}
	if len(f.backend.results) != 4 {
		t.Errorf("%d generations ran, want 4", len(f.backend.results))
	}
}

func TestSDKBadRequests(t *testing.T) {
	f := newFixture(t, "sk-test")
	ctx := context.Background()
	cases := []struct {
		name   string
		edit   func(p *openai.ChatCompletionNewParams)
		status int
		code   string
	}{
		{"unknown model", func(p *openai.ChatCompletionNewParams) { p.Model = "gpt-9" }, 404, "model_not_found"},
		{"temperature", func(p *openai.ChatCompletionNewParams) { p.Temperature = openai.Float(3) }, 400, "invalid_value"},
		{"no messages", func(p *openai.ChatCompletionNewParams) { p.Messages = nil }, 400, "invalid_value"},
		{"n", func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(2) }, 400, "invalid_value"},
		{"max_tokens", func(p *openai.ChatCompletionNewParams) { p.MaxTokens = openai.Int(0) }, 400, "invalid_value"},
		{"tools without template", func(p *openai.ChatCompletionNewParams) {
			p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "f"})}
		}, 400, "invalid_value"},
	}
	for _, c := range cases {
		p := f.params("Hi", 4)
		c.edit(&p)
		_, err := f.client.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != c.status || apiErr.Code != c.code || apiErr.Message == "" {
			t.Errorf("%s: %v, want %d %s", c.name, err, c.status, c.code)
		}
	}
	wrongKey := openai.NewClient(option.WithBaseURL(f.url+"/v1/"), option.WithAPIKey("sk-wrong"), option.WithMaxRetries(0))
	_, err := wrongKey.Chat.Completions.New(ctx, f.params("Hi", 4))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: %v, want 401", err)
	}

	raw := []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"messages": [`, 400},
		{"unknown field", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "bogus": 1}`, 400},
		{"wrong type", "POST", "/v1/chat/completions", `{"messages": "hello"}`, 400},
		{"bad role", "POST", "/v1/chat/completions", `{"messages": [{"role": "wizard", "content": "x"}]}`, 400},
		{"image part", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400},
		{"two objects", "POST", "/v1/chat/completions", `{"messages": []} {}`, 400},
		{"empty body", "POST", "/v1/completions", ``, 400},
		{"too large", "POST", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 70<<10) + `"}`, 413},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405},
		{"no route", "GET", "/v1/embeddings", ``, 404},
	}
	for _, c := range raw {
		req, _ := http.NewRequest(c.method, f.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var body struct {
			Error struct{ Message, Type string }
		}
		decodeErr := jsonDecode(resp, &body)
		if resp.StatusCode != c.status || decodeErr != nil || body.Error.Message == "" || body.Error.Type == "" {
			t.Errorf("%s: %d %+v (%v), want %d with an error object", c.name, resp.StatusCode, body, decodeErr, c.status)
		}
	}
	// The engine still answers after all that.
	if _, err := f.client.Chat.Completions.New(ctx, f.params("Hi", 2)); err != nil {
		t.Fatal(err)
	}
}

// Idle (the app unloading its model) stops the answer being written, tells its client, and
// keeps the next request off the engine until released.
func TestIdle(t *testing.T) {
	f := newFixture(t, "")
	s := f.client.Chat.Completions.NewStreaming(context.Background(), f.params("Tell me a long story", 1500))
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	release := f.api.Idle()
	for s.Next() {
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "unloaded") {
		t.Errorf("the interrupted stream ended with %v, want the reason", err)
	}
	if res := <-f.backend.results; res.Stop != engine.StopCancelled {
		t.Errorf("the interrupted generation stopped with %q", res.Stop)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := f.client.Chat.Completions.New(context.Background(), f.params("Hi", 2))
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a request was answered while the engine was held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}

// A request that waited while the app swapped its model is refused, not run on the old one.
func TestModelSwappedWhileWaiting(t *testing.T) {
	m := tinyModel(t)
	first, second := serve.NewLocal(m, engine.ContextStop), serve.NewLocal(m, engine.ContextStop)
	var cur atomic.Pointer[serve.Local]
	cur.Store(first)
	asked := make(chan struct{}, 8)
	api := serve.New(func() serve.Backend {
		asked <- struct{}{}
		return cur.Load()
	}, serve.Options{})
	srv := httptest.NewServer(api)
	defer srv.Close()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithMaxRetries(0))
	release := api.Idle()
	answered := make(chan error, 1)
	go func() {
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "tiny", MaxTokens: openai.Int(2),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
		answered <- err
	}()
	<-asked // the request has checked the model and now waits behind the hold
	cur.Store(second)
	release()
	var apiErr *openai.Error
	if err := <-answered; !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "model_changed" {
		t.Fatalf("a request queued across a model swap: %v, want 503 model_changed", err)
	}
}
