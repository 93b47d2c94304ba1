package serve_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"strata/app/serve"
	"strata/engine"
)

// A conversation longer than the context follows the server's policy: stop answers 400
// context_length_exceeded (an OpenAI error the SDK reads), drop-oldest answers from the
// newest turns and says in usage that the prompt fitted.
func TestContextFullPolicy(t *testing.T) {
	m := tinyModelWithContext(t, 128)
	long := strings.Repeat("tell me more about the weather ", 12)
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse.")}
	for range 4 {
		msgs = append(msgs, openai.UserMessage(long), openai.AssistantMessage(long))
	}
	msgs = append(msgs, openai.UserMessage("Hi"))
	params := openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs, MaxTokens: openai.Int(4), Temperature: openai.Float(0)}

	for _, policy := range []engine.ContextPolicy{engine.ContextStop, engine.ContextDropOldest} {
		t.Run(string(policy), func(t *testing.T) {
			b := serve.NewLocal(m, policy)
			srv := httptest.NewServer(serve.New(func() serve.Backend { return b }, serve.Options{}))
			defer srv.Close()
			c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithMaxRetries(0))
			res, err := c.Chat.Completions.New(context.Background(), params)
			if policy == engine.ContextStop {
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "context_length_exceeded" {
					t.Fatalf("got %v, %v; want 400 context_length_exceeded", res, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("drop-oldest: %v", err)
			}
			if res.Usage.PromptTokens+res.Usage.CompletionTokens > 128 || res.Usage.CompletionTokens == 0 {
				t.Errorf("drop-oldest: usage %+v does not fit a 128-token context", res.Usage)
			}
		})
	}
}
