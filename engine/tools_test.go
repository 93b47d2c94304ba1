package engine

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/tokenizer"
)

// TestChatWithToolsMatchesTransformers renders every reference conversation that has tools
// or tool calls through the engine's own path (Message.ToolCalls, ToolName and tool
// definitions as JSON text, as the server hands them over) and compares the prompt's ids
// with transformers'. Templates that print today's date (strftime_now) and kwargs other
// than enable_thinking are beyond what the engine's chat call can pin, so those rows are
// counted and left out.
func TestChatWithToolsMatchesTransformers(t *testing.T) {
	f, err := os.Open(fixtures.Path(t, "tokenizers", "chat_templates.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		Tokenizer string `json:"tokenizer"`
		ID        string `json:"conversation_id"`
		Messages  []struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			Name      string  `json:"name"`
			ToolCalls []struct {
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools  []json.RawMessage `json:"tools"`
		Gen    bool              `json:"add_generation_prompt"`
		Kwargs map[string]any    `json:"template_kwargs"`
		IDs    []int             `json:"ids"`
	}
	codecs := map[string]*textCodec{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	checked, left := 0, 0
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		withTools := len(r.Tools) > 0
		for _, m := range r.Messages {
			withTools = withTools || len(m.ToolCalls) > 0 || m.Role == "tool"
		}
		if !withTools {
			continue
		}
		c := codecs[r.Tokenizer]
		if c == nil {
			tok, err := tokenizer.LoadFile(fixtures.Path(t, "tokenizers", r.Tokenizer, "tokenizer.json.gz"))
			if err != nil {
				t.Fatal(err)
			}
			c = &textCodec{tok: tok, template: tok.ChatTemplate()}
			codecs[r.Tokenizer] = c
		}
		var thinking *bool
		other := false
		for k, v := range r.Kwargs {
			if b, ok := v.(bool); ok && k == "enable_thinking" {
				thinking = &b
			} else {
				other = true
			}
		}
		if other || c.template == "" || strings.Contains(c.template, "strftime_now") {
			left++
			continue
		}
		msgs := make([]Message, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = Message{Role: Role(m.Role), ToolName: m.Name}
			if m.Content != nil {
				msgs[i].Content = *m.Content
			}
			for _, call := range m.ToolCalls {
				msgs[i].ToolCalls = append(msgs[i].ToolCalls, ToolCall{Name: call.Function.Name, Arguments: string(call.Function.Arguments)})
			}
		}
		tools := make([]string, len(r.Tools))
		for i, tl := range r.Tools {
			tools[i] = string(tl)
		}
		ids, err := c.chatTokens(msgs, tools, thinking, r.Gen)
		if err != nil {
			t.Errorf("%s %s: %v", r.Tokenizer, r.ID, err)
			continue
		}
		if !slices.Equal(ids, r.IDs) {
			t.Errorf("%s %s: ids differ from transformers'\n got %q\nwant %q", r.Tokenizer, r.ID, c.tok.Decode(ids), c.tok.Decode(r.IDs))
		}
		checked++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatalf("no conversation with tools could be checked (%d left out)", left)
	}
	t.Logf("%d conversations with tools checked, %d left out (date or kwargs)", checked, left)
}
