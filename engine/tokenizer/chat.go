package tokenizer

import (
	"strings"
	"time"

	"strata/engine/tokenizer/chattmpl"
)

// The chat-template API lives in the chattmpl subpackage; these names let the engine use
// it through the tokenizer it already holds.
type (
	// ChatMessage is one turn of a conversation.
	ChatMessage = chattmpl.ChatMessage
	// ToolCall is a function call made by the assistant.
	ToolCall = chattmpl.ToolCall
	// RenderOptions are apply_chat_template's variables besides the messages.
	RenderOptions = chattmpl.RenderOptions
	// ReasoningSplitter separates streamed thinking from the answer.
	ReasoningSplitter = chattmpl.ReasoningSplitter
)

// Reasoning styles for NewReasoningSplitter.
const (
	StyleNone      = chattmpl.StyleNone
	StyleThink     = chattmpl.StyleThink
	StyleThinkOpen = "think-open" // like think, but the prompt already opened <think>
	StyleHarmony   = chattmpl.StyleHarmony
)

// RenderChat renders msgs with a Jinja chat template (see chattmpl).
func RenderChat(tmpl string, msgs []ChatMessage, opts RenderOptions) (string, error) {
	return chattmpl.RenderChat(tmpl, msgs, opts)
}

// TemplateFor returns the model's template when it works, else a built-in one for arch
// with a warning for the user.
func TemplateFor(arch, modelTemplate string) (tmpl, warning string) {
	return chattmpl.TemplateFor(arch, modelTemplate)
}

// NewReasoningSplitter makes a splitter for a style from ReasoningStyle.
func NewReasoningSplitter(style string) *ReasoningSplitter {
	if style == StyleThinkOpen {
		r := chattmpl.NewReasoningSplitter(StyleThink)
		r.StartThinking()
		return r
	}
	return chattmpl.NewReasoningSplitter(style)
}

// ReasoningStyle says how a model marks its thinking: from the template when it says
// (think, harmony; think-open when its generation prompt itself ends inside <think>), else
// from the vocabulary's tokens.
func ReasoningStyle(tmpl string, t *Tokenizer) string {
	style := chattmpl.DetectStyle(tmpl)
	if style == StyleNone && t != nil {
		if _, ok := t.ID("<|channel|>"); ok {
			style = StyleHarmony
		} else if _, ok := t.ID("</think>"); ok {
			style = StyleThink
		}
	}
	if style == StyleThink && opensThink(tmpl) {
		return StyleThinkOpen
	}
	return style
}

// opensThink renders a one-message chat and reports whether the generation prompt ends
// with an open <think> (Qwen3 "thinking-2507" and DeepSeek-R1 style templates).
func opensThink(tmpl string) bool {
	out, err := chattmpl.RenderChat(tmpl, []ChatMessage{{Role: "user", Content: "hi"}},
		RenderOptions{AddGenerationPrompt: true, Now: func() time.Time { return time.Unix(0, 0) }})
	return err == nil && strings.HasSuffix(strings.TrimRight(out, "\n"), "<think>")
}

// BOSText is the BOS token's text ("" if none), for a template's bos_token.
func (t *Tokenizer) BOSText() string { return t.TokenText(t.bos) }

// EOSText is the EOS token's text ("" if none), for a template's eos_token.
func (t *Tokenizer) EOSText() string { return t.TokenText(t.eos) }
