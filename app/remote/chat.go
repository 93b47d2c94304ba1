package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"strata/engine"
)

// Model is one model on a server, chatted with the way the app chats with its engine.
type Model struct {
	c  *Client
	id string
}

// Connect checks that the server answers and serves model, and returns it.
func Connect(ctx context.Context, c *Client, model string) (*Model, error) {
	ids, err := c.Models(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if id == model {
			return &Model{c: c, id: model}, nil
		}
	}
	return nil, &Error{Kind: ErrModelGone, URL: c.base, Detail: fmt.Sprintf("it serves %s, not %q", strings.Join(ids, ", "), model)}
}

// ID is the model's name on the server.
func (m *Model) ID() string { return m.id }

// Client is the server the model is on.
func (m *Model) Client() *Client { return m.c }

// Info describes the model as far as the API tells: its name and where it runs.
func (m *Model) Info() engine.ModelInfo {
	return engine.ModelInfo{Path: m.c.base, Name: m.id, Architecture: "remote"}
}

type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatBody struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens     int      `json:"max_tokens,omitempty"`
	Temperature   float32  `json:"temperature"`
	TopP          float32  `json:"top_p,omitempty"`
	TopK          int      `json:"top_k,omitempty"`
	MinP          float32  `json:"min_p,omitempty"`
	RepeatPenalty float32  `json:"repeat_penalty,omitempty"`
	Seed          *uint64  `json:"seed,omitempty"`
	Stop          []string `json:"stop,omitempty"`
}

// Options are what a chat sends besides the engine's sampling settings.
type Options struct {
	Stop []string // stop sequences, applied by the server
}

// Chat streams an answer to msgs. Like the engine's Chat, a cancelled ctx ends it with the
// partial answer and StopCancelled; a stream that ends without its end mark returns the
// partial answer too, with an *Error of kind ErrStreamCut.
func (m *Model) Chat(ctx context.Context, msgs []engine.Message, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	return m.ChatWith(ctx, msgs, sp, Options{}, onToken)
}

// ChatWith is Chat with stop sequences.
func (m *Model) ChatWith(ctx context.Context, msgs []engine.Message, sp engine.Sampling, opts Options, onToken func(engine.Token)) (engine.Result, error) {
	body := chatBody{Model: m.id, Stream: true, MaxTokens: sp.MaxTokens, Temperature: sp.Temperature,
		TopK: sp.TopK, MinP: sp.MinP, Stop: opts.Stop}
	body.StreamOptions.IncludeUsage = true
	if sp.TopP > 0 && sp.TopP < 1 {
		body.TopP = sp.TopP
	}
	if sp.RepeatPenalty > 0 && sp.RepeatPenalty != 1 {
		body.RepeatPenalty = sp.RepeatPenalty
	}
	if sp.Seed != 0 {
		body.Seed = &sp.Seed
	}
	for _, msg := range msgs {
		body.Messages = append(body.Messages, wireMessage{Role: string(msg.Role), Content: msg.Content})
	}
	start := time.Now()
	var res engine.Result
	resp, err := m.c.do(ctx, http.MethodPost, "/chat/completions", body)
	if err != nil {
		if ctx.Err() != nil {
			res.Stop = engine.StopCancelled
			return res, nil
		}
		return res, err
	}
	defer resp.Body.Close()
	var answer, thinking strings.Builder
	var first time.Time
	emit := func(text string, isThinking bool) {
		if text == "" {
			return
		}
		if first.IsZero() {
			first = time.Now()
		}
		res.Timings.GeneratedTokens++ // one streamed piece is about one token; usage corrects it
		if isThinking {
			thinking.WriteString(text)
		} else {
			answer.WriteString(text)
		}
		if onToken != nil {
			onToken(engine.Token{ID: -1, Text: text, Thinking: isThinking})
		}
	}
	finished, done, serr := readStream(resp.Body, emit, &res)
	res.Text, res.Thinking = answer.String(), thinking.String()
	if !first.IsZero() {
		res.Timings.Prefill = first.Sub(start)
		res.Timings.Decode = time.Since(first)
	}
	switch {
	case ctx.Err() != nil:
		res.Stop = engine.StopCancelled
		return res, nil
	case serr != nil:
		return res, serr
	case !finished && !done:
		return res, &Error{Kind: ErrStreamCut, URL: m.c.base}
	}
	return res, nil
}

// chunk is one streamed event of a chat completion.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"` // vLLM's newer name
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// readStream reads server-sent events until [DONE] or the end of the body. It reports
// whether a finish_reason arrived and whether [DONE] did.
func readStream(r io.Reader, emit func(string, bool), res *engine.Result) (finished, done bool, err error) {
	rd := bufio.NewReaderSize(r, 64<<10)
	for {
		line, rerr := rd.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if data, ok := strings.CutPrefix(line, "data:"); ok {
			data = strings.TrimSpace(data)
			if data == "[DONE]" {
				return finished, true, nil
			}
			var c chunk
			if jerr := json.Unmarshal([]byte(data), &c); jerr != nil {
				return finished, false, &Error{Kind: ErrServer, Detail: "a streamed event is not JSON: " + jerr.Error()}
			}
			if len(c.Error) > 0 && string(c.Error) != "null" {
				return finished, false, &Error{Kind: ErrServer, Detail: serverMessage([]byte(`{"error":` + string(c.Error) + `}`))}
			}
			for _, ch := range c.Choices {
				emit(ch.Delta.ReasoningContent+ch.Delta.Reasoning, true)
				emit(ch.Delta.Content, false)
				if ch.FinishReason != nil && *ch.FinishReason != "" {
					finished = true
					res.Stop = engine.StopEndOfTurn
					if *ch.FinishReason == "length" {
						res.Stop = engine.StopMaxTokens
					}
				}
			}
			if c.Usage != nil {
				res.Timings.PromptTokens = c.Usage.PromptTokens
				res.Timings.GeneratedTokens = c.Usage.CompletionTokens
			}
		}
		if rerr != nil { // the end of the body, or a broken connection: the caller tells them apart by finished
			return finished, false, nil
		}
	}
}
