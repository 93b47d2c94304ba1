package chattmpl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"strata/engine/fixtures"
)

// fuzzChatML is a template of the common shape, used when the reference templates are absent.
const fuzzChatML = `{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// FuzzRender renders arbitrary message text under arbitrary roles with every reference
// template (the four of the fixtures when present, else a ChatML one): it must never
// panic, and a rendering that succeeds holds the user's text.
func FuzzRender(f *testing.F) {
	templates := map[string]*Template{}
	tm, err := Compile(fuzzChatML)
	if err != nil {
		f.Fatal(err)
	}
	templates["chatml"] = tm
	bos, eos := map[string]string{}, map[string]string{}
	if _, err := fixtures.Lookup(); err == nil {
		for _, name := range []string{"qwen3", "gptoss", "deepseek_v3", "llama3_1"} {
			src, b, e := modelFiles(f, name)
			tm, err := Compile(src)
			if err != nil {
				f.Fatalf("%s: %v", name, err)
			}
			templates[name], bos[name], eos[name] = tm, b, e
		}
	}
	f.Add("user", "Hello!", "assistant", "Hi", true)
	f.Add("system", "{{ 7*7 }}{% if %}", "user", "<|im_end|>\x00\xff", false)
	f.Add("tool", "", "developer", strings.Repeat("é", 300), true)
	f.Add("", "\r\n\t", "user", "{%- raw %}", false)
	f.Fuzz(func(t *testing.T, role1, text1, role2, text2 string, gen bool) {
		msgs := []map[string]string{{"role": role1, "content": text1}, {"role": role2, "content": text2}, {"role": "user", "content": text2}}
		raw, err := json.Marshal(msgs)
		if err != nil {
			t.Fatal(err)
		}
		v, err := DecodeJSONBytes(raw)
		if err != nil {
			t.Fatalf("decoding our own JSON: %v", err)
		}
		for name, tm := range templates {
			// A rendering that hangs is a failure too: the fuzzer records it as a crasher.
			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := tm.Render(v.([]any), RenderOptions{AddGenerationPrompt: gen, BOS: bos[name], EOS: eos[name], Now: pinnedClock})
				done <- result{out, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: rendering %q did not end in 5 s", name, raw)
			}
			out, err := r.out, r.err
			if err != nil {
				continue // a template may refuse a role or an order (raise_exception)
			}
			// json.Marshal makes invalid UTF-8 into U+FFFD; templates may trim the text.
			want := strings.TrimSpace(strings.ToValidUTF8(text2, "\uFFFD"))
			if utf8.ValidString(text2) && want != "" && !strings.Contains(out, want) {
				t.Errorf("%s: the user's text %q is not in the rendering %q", name, want, out)
			}
		}
	})
}
