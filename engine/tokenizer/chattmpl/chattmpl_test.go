package chattmpl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/engine/fixtures"
)

// reference is one line of tokenizers/chat_templates.jsonl.
type reference struct {
	Tokenizer, Conversation string
	Messages                []any
	Tools                   []any
	AddGenerationPrompt     bool
	Kwargs                  *Object
	Rendered                string
	IDs                     []int
}

func readReferences(t *testing.T) []reference {
	t.Helper()
	f, err := os.Open(fixtures.Path(t, "tokenizers", "chat_templates.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	var out []reference
	for sc.Scan() {
		v, err := DecodeJSONBytes(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		o := v.(*Object)
		get := func(k string) any { x, _ := o.Get(k); return x }
		r := reference{
			Tokenizer:           get("tokenizer").(string),
			Conversation:        get("conversation_id").(string),
			Messages:            get("messages").([]any),
			AddGenerationPrompt: get("add_generation_prompt").(bool),
			Kwargs:              get("template_kwargs").(*Object),
			Rendered:            get("rendered").(string),
		}
		if tools, ok := get("tools").([]any); ok {
			r.Tools = tools
		}
		for _, id := range get("ids").([]any) {
			r.IDs = append(r.IDs, int(id.(int64)))
		}
		out = append(out, r)
	}
	return out
}

// modelFiles reads a fixture tokenizer's template and bos/eos tokens.
func modelFiles(t testing.TB, name string) (tmpl, bos, eos string) {
	t.Helper()
	dir := fixtures.Path(t, "tokenizers", name)
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string          `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	tokName := func(m json.RawMessage) string {
		var s string
		if json.Unmarshal(m, &s) == nil {
			return s
		}
		var o struct{ Content string }
		_ = json.Unmarshal(m, &o)
		return o.Content
	}
	tmpl = cfg.ChatTemplate
	if j, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		tmpl = string(j)
	}
	return tmpl, tokName(cfg.BOS), tokName(cfg.EOS)
}

// pinnedClock is the date the gpt-oss references were rendered with.
func pinnedClock() time.Time { return time.Date(2025, 8, 15, 12, 0, 0, 0, time.UTC) }

// TestReferenceRenderings renders every reference conversation and checks the text byte
// for byte (package tokenizer checks the ids of the same renderings).
func TestReferenceRenderings(t *testing.T) {
	refs := readReferences(t)
	if want := fixtures.ChatRenderings(t); len(refs) != want {
		t.Errorf("%d references, chat_conversations.json has %d", len(refs), want)
	}
	tmpls := map[string]*Template{}
	ok := 0
	for _, r := range refs {
		tm, have := tmpls[r.Tokenizer]
		src, bos, eos := modelFiles(t, r.Tokenizer)
		if !have {
			var err error
			if tm, err = Compile(src); err != nil {
				t.Fatalf("%s: %v", r.Tokenizer, err)
			}
			tmpls[r.Tokenizer] = tm
		}
		kw := map[string]any{}
		for _, k := range r.Kwargs.Keys() {
			kw[k], _ = r.Kwargs.Get(k)
		}
		got, err := tm.Render(r.Messages, RenderOptions{
			AddGenerationPrompt: r.AddGenerationPrompt, BOS: bos, EOS: eos,
			Tools: r.Tools, Kwargs: kw, Now: pinnedClock,
		})
		if err != nil {
			t.Errorf("%s %s: %v", r.Tokenizer, r.Conversation, err)
			continue
		}
		if got != r.Rendered {
			t.Errorf("%s %s (agp=%v kwargs=%v):\n got %q\nwant %q", r.Tokenizer, r.Conversation, r.AddGenerationPrompt, kw, got, r.Rendered)
			continue
		}
		ok++
	}
	t.Logf("%d/%d renderings match", ok, len(refs))
}

func TestRenderChatMessages(t *testing.T) {
	src, _, eos := modelFiles(t, "qwen3")
	args := NewObject().Set("city", "Paris").Set("unit", "celsius")
	got, err := RenderChat(src, []ChatMessage{
		{Role: "user", Content: "Weather?"},
		{Role: "assistant", Content: "", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: args}}},
		{Role: "tool", Content: "sunny"},
	}, RenderOptions{AddGenerationPrompt: true, EOS: eos})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}`
	if !strings.Contains(got, want) || !strings.HasSuffix(got, "<|im_start|>assistant\n") {
		t.Errorf("rendered %q; want the tool call %s in order and a generation prompt", got, want)
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2025, 8, 5, 14, 7, 9, 0, time.UTC)
	for format, want := range map[string]string{
		"%Y-%m-%d":       "2025-08-05",
		"%d %B %Y":       "05 August 2025",
		"%a %b %e %H:%M": "Tue Aug  5 14:07",
		"%I:%M:%S %p %%": "02:07:09 PM %",
		"%j %y %Q":       "217 25 %Q",
	} {
		if got := strftime(at, format); got != want {
			t.Errorf("strftime(%q) = %q, want %q", format, got, want)
		}
	}
}

func TestTemplateFor(t *testing.T) {
	qwen, _, _ := modelFiles(t, "qwen3")
	if tmpl, warn := TemplateFor("qwen3moe", qwen); tmpl != qwen || warn != "" {
		t.Errorf("a working model template was replaced: %q", warn)
	}
	for _, tc := range []struct{ arch, model, contains string }{
		{"qwen3moe", "", "<|im_start|>"},
		{"qwen3moe", "{% for m in messages %}{{ m.content ", "<|im_start|>"}, // does not parse
		{"qwen3moe", "{{ raise_exception('nope') }}", "<|im_start|>"},        // fails to render
		{"gpt-oss", "", "<|channel|>final"},
		{"llama", "", "<|start_header_id|>"},
		{"deepseek2", "", "<｜User｜>"},
		{"mystery", "", "<|im_start|>"},
	} {
		tmpl, warn := TemplateFor(tc.arch, tc.model)
		if warn == "" {
			t.Errorf("%s %q: no warning", tc.arch, tc.model)
		}
		out, err := RenderChat(tmpl, []ChatMessage{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}},
			RenderOptions{AddGenerationPrompt: true, Now: pinnedClock})
		if err != nil || !strings.Contains(out, tc.contains) || !strings.Contains(out, "hi") {
			t.Errorf("%s: built-in template rendered %q, %v", tc.arch, out, err)
		}
	}
	got, _ := RenderChat(chatML, []ChatMessage{{Role: "user", Content: "hi"}}, RenderOptions{AddGenerationPrompt: true})
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; got != want {
		t.Errorf("ChatML = %q, want %q", got, want)
	}
}

func TestDecodeJSONKeepsOrder(t *testing.T) {
	v, err := DecodeJSON(bytes.NewReader([]byte(`{"z": 1, "a": [true, null, 2.5, "s"], "m": {"y": 1, "b": 2}}`)))
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*Object)
	if got := o.Keys(); !slices.Equal(got, []string{"z", "a", "m"}) {
		t.Errorf("keys %v", got)
	}
	tm, err := Compile("{{ messages[0] | tojson }}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Render([]any{o}, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z": 1, "a": [true, null, 2.5, "s"], "m": {"y": 1, "b": 2}}`; got != want {
		t.Errorf("tojson = %s, want %s", got, want)
	}
	if _, err := DecodeJSONBytes([]byte(`{"a": `)); err == nil {
		t.Error("truncated JSON: no error")
	}
}
