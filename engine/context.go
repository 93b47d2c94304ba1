package engine

import (
	"fmt"
	"strings"

	"strata/engine/kv"
)

// checkContextLimit refuses a --max-context above what the model takes, naming the model's
// limit and where it comes from.
func checkContextLimit(cfg Config, info ModelInfo) error {
	limit := info.ContextLimit
	if cfg.MaxContext <= 0 || limit <= 0 || cfg.MaxContext <= limit {
		return nil
	}
	from := "the file's context_length"
	switch {
	case limit > info.ContextLength:
		from = fmt.Sprintf("YaRN in the file: its factor x original context; %d trained", info.ContextLength)
	case info.Architecture == "qwen3moe":
		from += "; YaRN is not configured in the file"
	}
	return &ConfigError{Flag: "max-context", Msg: fmt.Sprintf("%d tokens is more than this %s model takes: %d tokens (%s); use --max-context %d or less",
		cfg.MaxContext, info.Architecture, limit, from, limit)}
}

// sessionBytes is what one session's state takes beside the weights for ctx positions:
// the KV cache of the attention layers (sliding-window layers at most their ring) and the
// hybrids' recurrent state with its checkpoints.
func sessionBytes(info ModelInfo, ctx int, t kv.Type) int64 {
	return kvBytes(info, ctx, t) + info.RecurrentBytes
}

// checkContextFits refuses a --max-context whose session state does not fit in budget
// bytes, with the choices that would fit: the int8 cache,
// the longest context that fits.
func checkContextFits(cfg Config, info ModelInfo, budget int64) error {
	ctx, t := cfg.MaxContext, kvType(cfg)
	need := sessionBytes(info, ctx, t)
	if ctx <= 0 || budget <= 0 || need <= budget {
		return nil
	}
	perTok := kvBytes(info, 1, t)
	var choices []string
	if t != kv.Int8 {
		n8 := sessionBytes(info, ctx, kv.Int8)
		verdict := "fits"
		if n8 > budget {
			verdict = "does not fit either"
		}
		choices = append(choices, fmt.Sprintf("--kv int8 (%s, %s)", gibs(n8), verdict))
	}
	if fit := longestFitting(info, t, budget); fit > 0 {
		choices = append(choices, fmt.Sprintf("--max-context %d", fit))
	}
	choices = append(choices, "free memory")
	return &ConfigError{Flag: "max-context", Msg: fmt.Sprintf("%d tokens need %s of KV cache and state (%s a token, %s) but only %s are free for them; use %s",
		ctx, gibs(need), kib(perTok), t, gibs(budget), strings.Join(choices, ", or "))}
}

// longestFitting is the longest context, a multiple of 256 tokens, whose session state fits
// in budget (0 when not even 256 do).
func longestFitting(info ModelInfo, t kv.Type, budget int64) int {
	perTok := kvBytes(info, 1, t)
	if perTok <= 0 {
		return 0
	}
	n := int((budget - sessionBytes(info, 0, t)) / perTok)
	n -= n % 256
	for n > 0 && sessionBytes(info, n, t) > budget { // ring layers make the cost not quite linear
		n -= 256
	}
	return max(n, 0)
}

// checkPromptFits refuses tokens that do not fit in a context of capacity positions,
// leaving one for the token the caller samples when sample is set.
func checkPromptFits(tokens, capacity int, sample bool) error {
	room := capacity
	if sample {
		room--
	}
	if tokens <= room {
		return nil
	}
	need := tokens
	if sample {
		need++
	}
	return fmt.Errorf("engine: %w: the prompt is %d tokens but the context holds %d; shorten it or raise --max-context to at least %d",
		ErrContextFull, tokens, capacity, need)
}

func gibs(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }
