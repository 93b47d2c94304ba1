package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"strata/engine"
)

func runRun(ctx context.Context, args []string, io IO) error {
	fs := newFlags("run", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	prompt := fs.String("p", "", "prompt text (tokenised with special tokens recognised)")
	tokens := fs.String("tokens", "", "prompt as token ids: 1,2,3")
	n := fs.Int("n", 128, "tokens to generate")
	temp := fs.Float64("temp", 0, "temperature (0 = greedy)")
	seed := fs.Uint64("seed", 0, "sampling seed")
	topK := fs.Int("top-k", 0, "top-k (0 = off)")
	topP := fs.Float64("top-p", 0, "top-p (0 = off)")
	minP := fs.Float64("min-p", 0, "min-p (0 = off)")
	repeat := fs.Float64("repeat-penalty", 0, "repetition penalty (0 or 1 = off)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	if (*prompt == "") == (*tokens == "") {
		return usagef("give exactly one of -p TEXT or --tokens 1,2,3")
	}
	if *n < 0 {
		return usagef("-n %d is negative", *n)
	}
	m, err := engine.Open(ctx, *modelPath, cfg, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	var ids []int
	if *tokens != "" {
		if ids, err = parseIntList(*tokens); err != nil {
			return usagef("--tokens: %v", err)
		}
	} else {
		if ids = m.Tokenize(*prompt, true); len(ids) == 0 {
			return fmt.Errorf("the prompt %q gives no tokens: %s has no token for its bytes (they are dropped); give ids with --tokens", *prompt, *modelPath)
		}
	}
	sp := engine.Sampling{Temperature: float32(*temp), Seed: *seed, TopK: *topK, TopP: float32(*topP),
		MinP: float32(*minP), RepeatPenalty: float32(*repeat), MaxTokens: *n}
	if *n == 0 {
		sp.MaxTokens = 0
	}
	s := m.NewSession(engine.SessionOptions{})
	var onToken func(engine.Token)
	if !*asJSON {
		onToken = func(t engine.Token) { fmt.Fprint(io.Out, t.Text) }
	}
	res, err := s.Generate(ctx, ids, sp, onToken)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintln(io.Out)
		fmt.Fprintf(io.Err, "%d prompt tokens at %.1f tok/s, %d generated at %.1f tok/s (%s, stop: %s)\n",
			res.Timings.PromptTokens, res.Timings.PrefillTokensPerSec(), res.Timings.GeneratedTokens,
			res.Timings.DecodeTokensPerSec(), m.Backend(), res.Stop)
		return nil
	}
	out := struct {
		Tokens  []int  `json:"tokens"`
		Text    string `json:"text"`
		Stop    string `json:"stop"`
		Timings struct {
			PromptTokens    int     `json:"prompt_tokens"`
			GeneratedTokens int     `json:"generated_tokens"`
			PrefillSeconds  float64 `json:"prefill_s"`
			DecodeSeconds   float64 `json:"decode_s"`
			PrefillTPS      float64 `json:"prefill_tokens_per_s"`
			DecodeTPS       float64 `json:"decode_tokens_per_s"`
		} `json:"timings"`
	}{Tokens: res.Tokens, Text: res.Thinking + res.Text, Stop: string(res.Stop)}
	if out.Tokens == nil {
		out.Tokens = []int{}
	}
	t := res.Timings
	out.Timings.PromptTokens, out.Timings.GeneratedTokens = t.PromptTokens, t.GeneratedTokens
	out.Timings.PrefillSeconds, out.Timings.DecodeSeconds = t.Prefill.Seconds(), t.Decode.Seconds()
	out.Timings.PrefillTPS, out.Timings.DecodeTPS = t.PrefillTokensPerSec(), t.DecodeTokensPerSec()
	return json.NewEncoder(io.Out).Encode(out)
}
