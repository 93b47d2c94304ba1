package chattmpl

import (
	"strings"
	"testing"
)

// feedAll streams text in chunks of n bytes (and once more rune by rune for n=0).
func feedAll(style string, startThinking bool, text string, n int) (string, string) {
	r := NewReasoningSplitter(style)
	if startThinking {
		r.StartThinking()
	}
	var th, an strings.Builder
	for i := 0; i < len(text); i += n {
		a, b := r.Feed(text[i:min(i+n, len(text))])
		th.WriteString(a)
		an.WriteString(b)
	}
	a, b := r.Flush()
	th.WriteString(a)
	an.WriteString(b)
	return th.String(), an.String()
}

func TestReasoningSplitter(t *testing.T) {
	for _, tc := range []struct {
		name, style   string
		startThinking bool
		out           string
		think, answer string
	}{
		{"qwen3 thinking", StyleThink, false, "<think>\nLet me see: 17 is prime.\n</think>\n\nYes, 17 is prime.", "Let me see: 17 is prime.", "Yes, 17 is prime."},
		{"qwen3 no thinking", StyleThink, false, "Hello there!", "", "Hello there!"},
		{"qwen3 empty think", StyleThink, false, "<think>\n\n</think>\n\nHi", "", "Hi"},
		{"prompt opened think", StyleThink, true, "hmm, 2+2=4\n</think>\n\n4", "hmm, 2+2=4", "4"},
		{"unfinished think", StyleThink, false, "<think>\nstill going", "still going", ""},
		{"answer mentions tag", StyleThink, false, "Use <b> tags", "", "Use <b> tags"},
		{"harmony", StyleHarmony, false,
			"<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
			"User asks 2+2. Answer 4.", "2 + 2 = 4."},
		{"harmony final only", StyleHarmony, false, "<|channel|>final<|message|>Hi!<|return|>", "", "Hi!"},
		{"harmony plain text", StyleHarmony, false, "Just text", "", "Just text"},
		{"harmony tool call", StyleHarmony, false,
			"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
			"Need weather.", "{\"city\":\"Paris\"}"},
		{"none", StyleNone, false, "<think>x</think>y", "", "<think>x</think>y"},
	} {
		for _, n := range []int{1, 2, 3, 7, 1000} {
			th, an := feedAll(tc.style, tc.startThinking, tc.out, n)
			if th != tc.think || an != tc.answer {
				t.Errorf("%s (chunks of %d): thinking %q answer %q, want %q %q", tc.name, n, th, an, tc.think, tc.answer)
			}
		}
	}
}

func TestDetectStyle(t *testing.T) {
	for _, name := range []string{"qwen3", "gptoss", "llama3_1"} {
		tmpl, _, _ := modelFiles(t, name)
		want := map[string]string{"qwen3": StyleThink, "gptoss": StyleHarmony, "llama3_1": StyleNone}[name]
		if got := DetectStyle(tmpl); got != want {
			t.Errorf("%s: DetectStyle = %s, want %s", name, got, want)
		}
	}
}
