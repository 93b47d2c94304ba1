package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"strata/app/serve"
	"strata/engine"
)

// scripted is a Backend whose model thinks, then calls a tool in the Qwen/Hermes format,
// streamed in awkward pieces; it keeps what the server handed it.
type scripted struct {
	gotMsgs     []engine.Message
	gotTools    []string
	gotThinking *bool
}

func (s *scripted) ModelID() string { return "scripted" }
func (s *scripted) ChatTemplate() string {
	return "{% if tools %}{{ tools }}{% endif %}<tool_call>{{ messages }}</tool_call>"
}
func (s *scripted) ContextLength() int      { return 4096 }
func (s *scripted) Detokenize([]int) string { return "" }
func (s *scripted) Complete(context.Context, string, engine.Sampling, func(engine.Token)) (engine.Result, error) {
	return engine.Result{}, nil
}

func (s *scripted) Chat(ctx context.Context, in serve.ChatInput, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	s.gotMsgs, s.gotTools, s.gotThinking = in.Messages, in.Tools, in.Thinking
	onToken(engine.Token{Text: "The user wants weather.", Thinking: true})
	pieces := []string{"Checking. <tool", "_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}\n</tool_", "call>"}
	for _, p := range pieces {
		onToken(engine.Token{Text: p})
	}
	res := engine.Result{Text: strings.Join(pieces, ""), Thinking: "The user wants weather.", Stop: engine.StopEndOfTurn}
	res.Timings.PromptTokens, res.Timings.GeneratedTokens = 10, 12
	return res, nil
}

func TestSDKToolCalls(t *testing.T) {
	b := &scripted{}
	srv := httptest.NewServer(serve.New(func() serve.Backend { return b }, serve.Options{}))
	defer srv.Close()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	weather := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Weather of a city"),
		Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})
	p := openai.ChatCompletionNewParams{Model: "scripted", Tools: []openai.ChatCompletionToolUnionParam{weather},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}}

	res, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	msg := res.Choices[0].Message
	if res.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" ||
		msg.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || msg.ToolCalls[0].ID == "" {
		t.Fatalf("tool calls %+v, finish %q", msg.ToolCalls, res.Choices[0].FinishReason)
	}
	if msg.Content != "Checking." {
		t.Errorf("content %q, want the text before the call", msg.Content)
	}
	var raw struct {
		Reasoning string `json:"reasoning_content"`
	}
	if err := json.Unmarshal([]byte(msg.RawJSON()), &raw); err != nil || raw.Reasoning != "The user wants weather." {
		t.Errorf("reasoning_content %q (%v)", raw.Reasoning, err)
	}
	if len(b.gotTools) != 1 || !strings.Contains(b.gotTools[0], `"name":"get_weather"`) {
		t.Errorf("the backend got tools %q", b.gotTools)
	}
	if b.gotThinking != nil {
		t.Errorf("thinking %v without chat_template_kwargs", *b.gotThinking)
	}
	if _, err := c.Chat.Completions.New(ctx, p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false})); err != nil || b.gotThinking == nil || *b.gotThinking {
		t.Errorf("chat_template_kwargs enable_thinking=false: %v, got %v", err, b.gotThinking)
	}
	_, err = c.Chat.Completions.New(ctx, p, option.WithJSONSet("chat_template_kwargs", map[string]any{"reasoning_effort": "high"}))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("an unsupported template kwarg: %v, want 400", err)
	}

	var acc openai.ChatCompletionAccumulator
	s := c.Chat.Completions.NewStreaming(ctx, p)
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if calls := acc.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city": "Paris"}` ||
		acc.Choices[0].Message.Content != "Checking. " && acc.Choices[0].Message.Content != "Checking." {
		t.Errorf("streamed: content %q, calls %+v", acc.Choices[0].Message.Content, calls)
	}

	// The call and its result go back to the model as the template expects them.
	p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage(`{"temp": 21}`, msg.ToolCalls[0].ID))
	if _, err := c.Chat.Completions.New(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n := len(b.gotMsgs); n != 3 || len(b.gotMsgs[1].ToolCalls) != 1 || b.gotMsgs[1].ToolCalls[0].Arguments != `{"city": "Paris"}` ||
		b.gotMsgs[2].Role != engine.RoleTool || b.gotMsgs[2].ToolName != "get_weather" || b.gotMsgs[2].Content != `{"temp": 21}` {
		t.Errorf("messages handed to the engine: %+v", b.gotMsgs)
	}
}

// harmony is a gpt-oss-like model: its reasoning splitter passes the call's arguments as
// answer text, and the function's name is only in the raw tokens.
type harmony struct{ scripted }

func (h *harmony) ChatTemplate() string {
	return "{% if tools %}<|channel|>commentary to=functions.{% endif %}"
}

func (h *harmony) Detokenize([]int) string {
	return "<|channel|>analysis<|message|>Weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>"
}

func (h *harmony) Chat(ctx context.Context, in serve.ChatInput, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	onToken(engine.Token{Text: "Weather.", Thinking: true})
	onToken(engine.Token{Text: `{"city":"Oslo"}`})
	return engine.Result{Tokens: []int{1, 2, 3}, Text: `{"city":"Oslo"}`, Stop: engine.StopEndOfTurn}, nil
}

func TestSDKHarmonyToolCalls(t *testing.T) {
	h := &harmony{}
	srv := httptest.NewServer(serve.New(func() serve.Backend { return h }, serve.Options{}))
	defer srv.Close()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithMaxRetries(0))
	p := openai.ChatCompletionNewParams{Model: "scripted", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather"})}}
	var acc openai.ChatCompletionAccumulator
	s := c.Chat.Completions.NewStreaming(context.Background(), p)
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" || msg.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` || msg.Content != "" {
		t.Errorf("content %q, calls %+v", msg.Content, msg.ToolCalls)
	}
}
