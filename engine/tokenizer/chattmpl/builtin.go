package chattmpl

import (
	"fmt"
	"strings"
	"time"
)

// chatML is the ChatML format of the Qwen family.
const chatML = `{%- for message in messages %}{{ '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{%- endif %}`

// harmony is a minimal gpt-oss (Harmony) template: system header, developer instructions,
// user and final-channel assistant turns.
const harmony = `{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ' + strftime_now('%Y-%m-%d') + '\n\nReasoning: ' + (reasoning_effort | default('medium')) + '\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>' }}
{%- for m in messages %}
{%- if m.role == 'system' or m.role == 'developer' %}{{ '<|start|>developer<|message|># Instructions\n\n' + m.content + '<|end|>' }}
{%- elif m.role == 'user' %}{{ '<|start|>user<|message|>' + m.content + '<|end|>' }}
{%- elif m.role == 'assistant' %}{{ '<|start|>assistant<|channel|>final<|message|>' + m.content + '<|end|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|start|>assistant' }}{%- endif %}`

// llama3 is the Llama-3 Instruct header format.
const llama3 = `{{- bos_token }}
{%- for m in messages %}{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\n\n' + m.content | trim + '<|eot_id|>' }}{%- endfor %}
{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}`

// deepseek is DeepSeek-V3's format without tools.
const deepseek = `{{- bos_token }}
{%- for m in messages %}{%- if m.role == 'system' %}{{ m.content }}{%- endif %}{%- endfor %}
{%- for m in messages %}
{%- if m.role == 'user' %}{{ '<｜User｜>' + m.content }}
{%- elif m.role == 'assistant' %}{{ '<｜Assistant｜>' + m.content + '<｜end▁of▁sentence｜>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<｜Assistant｜>' }}{%- endif %}`

// Builtin returns the built-in template for an architecture (general.architecture in GGUF)
// and the name of its format. Unknown architectures get ChatML.
func Builtin(arch string) (tmpl, format string) {
	a := strings.ToLower(arch)
	switch {
	case strings.HasPrefix(a, "gpt-oss") || strings.HasPrefix(a, "gptoss"):
		return harmony, "harmony"
	case strings.HasPrefix(a, "llama"):
		return llama3, "llama3"
	case strings.HasPrefix(a, "deepseek"):
		return deepseek, "deepseek"
	}
	return chatML, "chatml"
}

// TemplateFor chooses the template to use: the model's own when it compiles and renders a
// probe conversation, else the built-in one for the architecture (ChatML for qwen*), with a
// warning the app can show. warning is "" when the model's template is used.
func TemplateFor(arch, modelTemplate string) (tmpl, warning string) {
	fallback, format := Builtin(arch)
	if strings.TrimSpace(modelTemplate) == "" {
		return fallback, fmt.Sprintf("the model has no chat template; using the built-in %s template for %q", format, arch)
	}
	if err := probe(modelTemplate); err != nil {
		return fallback, fmt.Sprintf("the model's chat template cannot be rendered (%v); using the built-in %s template for %q", err, format, arch)
	}
	return modelTemplate, ""
}

// probe renders a small conversation to check a template works with our engine.
func probe(src string) error {
	t, err := Compile(src)
	if err != nil {
		return err
	}
	msgs := []any{
		ChatMessage{Role: "system", Content: "You are a helpful assistant."}.Value(),
		ChatMessage{Role: "user", Content: "Hello"}.Value(),
		ChatMessage{Role: "assistant", Content: "Hi!"}.Value(),
		ChatMessage{Role: "user", Content: "How are you?"}.Value(),
	}
	out, err := t.Render(msgs, RenderOptions{AddGenerationPrompt: true, Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		return err
	}
	if !strings.Contains(out, "How are you?") {
		return fmt.Errorf("the rendered prompt does not contain the user's message")
	}
	return nil
}
