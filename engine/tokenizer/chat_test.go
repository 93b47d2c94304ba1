package tokenizer

import (
	"bufio"
	"os"
	"slices"
	"testing"
	"time"

	"strata/engine/fixtures"
	"strata/engine/tokenizer/chattmpl"
)

// TestChatTemplateIDs renders every reference conversation with the model's own template
// (as LoadFile finds it beside tokenizer.json) and checks the token ids of the prompt.
func TestChatTemplateIDs(t *testing.T) {
	f, err := os.Open(fixtures.Path(t, "tokenizers", "chat_templates.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	n := 0
	for sc.Scan() {
		v, err := chattmpl.DecodeJSONBytes(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		row := v.(*chattmpl.Object)
		get := func(k string) any { x, _ := row.Get(k); return x }
		name := get("tokenizer").(string)
		tk := testSet().get(t, name)
		tm, err := chattmpl.Compile(tk.ChatTemplate())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kw := map[string]any{}
		kwo := get("template_kwargs").(*chattmpl.Object)
		for _, k := range kwo.Keys() {
			kw[k], _ = kwo.Get(k)
		}
		tools, _ := get("tools").([]any)
		out, err := tm.Render(get("messages").([]any), RenderOptions{
			AddGenerationPrompt: get("add_generation_prompt").(bool),
			BOS:                 tk.BOSText(), EOS: tk.EOSText(), Tools: tools, Kwargs: kw,
			Now: func() time.Time { return time.Date(2025, 8, 15, 12, 0, 0, 0, time.UTC) },
		})
		if err != nil {
			t.Errorf("%s %s: %v", name, get("conversation_id"), err)
			continue
		}
		if out != get("rendered").(string) {
			t.Errorf("%s %s: rendered %q, want %q", name, get("conversation_id"), out, get("rendered"))
			continue
		}
		var want []int
		for _, id := range get("ids").([]any) {
			want = append(want, int(id.(int64)))
		}
		if got := tk.Encode(out, true); !slices.Equal(got, want) {
			t.Errorf("%s %s: ids %v, want %v", name, get("conversation_id"), got, want)
		}
		n++
	}
	if want := fixtures.ChatRenderings(t); n != want {
		t.Errorf("checked %d renderings, chat_conversations.json has %d", n, want)
	}
}

func TestHFConfigAndStyle(t *testing.T) {
	for _, tc := range []struct {
		name, bos, eos, style string
		addBOS                bool
	}{
		{"qwen3", "", "<|im_end|>", StyleThink, false},
		{"gptoss", "<|startoftext|>", "<|return|>", StyleHarmony, false},
		{"deepseek_v3", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", StyleNone, true},
		{"llama3_1", "<|begin_of_text|>", "<|eot_id|>", StyleNone, true},
	} {
		tk := testSet().get(t, tc.name)
		if tk.BOSText() != tc.bos || tk.EOSText() != tc.eos || tk.AddBOS() != tc.addBOS {
			t.Errorf("%s: bos %q eos %q addBOS %v, want %q %q %v", tc.name, tk.BOSText(), tk.EOSText(), tk.AddBOS(), tc.bos, tc.eos, tc.addBOS)
		}
		if eos, _ := tk.EOS(); !tk.IsEndOfGeneration(eos) {
			t.Errorf("%s: EOS is not end of generation", tc.name)
		}
		if got := ReasoningStyle(tk.ChatTemplate(), tk); got != tc.style {
			t.Errorf("%s: ReasoningStyle = %s, want %s", tc.name, got, tc.style)
		}
	}
	qwen := testSet().get(t, "qwen3")
	for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := qwen.ID(name); !ok || !qwen.IsEndOfGeneration(id) {
			t.Errorf("qwen3: %s is not end of generation", name)
		}
	}
	if id, _ := qwen.ID("<think>"); qwen.IsEndOfGeneration(id) || qwen.IsSpecial(id) {
		t.Error("qwen3: <think> must be neither special nor an end token")
	}
	gpt := testSet().get(t, "gptoss")
	if id, _ := gpt.ID("<|end|>"); gpt.IsEndOfGeneration(id) {
		t.Error("gptoss: <|end|> closes the analysis message, not the turn")
	}
	if got := ReasoningStyle("", gpt); got != StyleHarmony {
		t.Errorf("gptoss vocabulary without template: style %s", got)
	}
	if got := ReasoningStyle("", qwen); got != StyleThink {
		t.Errorf("qwen3 vocabulary without template: style %s", got)
	}
	open := `{{ messages[0].content }}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}`
	if got := ReasoningStyle(open, nil); got != StyleThinkOpen {
		t.Errorf("open-think template: style %s", got)
	}
	r := NewReasoningSplitter(StyleThinkOpen)
	th, an := r.Feed("mull\n</think>\n\nok")
	if th != "mull" || an != "ok" {
		t.Errorf("think-open split: %q %q", th, an)
	}
}
