package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"strata/engine"
)

func runChat(ctx context.Context, args []string, io IO) error {
	fs := newFlags("chat", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	system := fs.String("system", "", "system prompt")
	temp := fs.Float64("temp", 0.7, "temperature (0 = greedy)")
	topP := fs.Float64("top-p", 0.8, "top-p")
	topK := fs.Int("top-k", 20, "top-k")
	seed := fs.Uint64("seed", 0, "sampling seed")
	maxTokens := fs.Int("n", 0, "most tokens per answer (0 = until the model stops)")
	noThink := fs.Bool("no-think", false, "ask templates that support it (Qwen3) to skip thinking")
	contextFull := fs.String("context-full", "stop", "when the chat reaches the context length: stop (say so and wait for /reset) or drop-oldest (leave out the oldest turns, keeping the system prompt)")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	policy, err := engine.ParseContextPolicy(*contextFull)
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprintf(io.Err, "loading %s ...\n", *modelPath)
	m, err := engine.Open(ctx, *modelPath, cfg, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	if w := m.TemplateWarning(); w != "" {
		fmt.Fprintf(io.Err, "note: %s\n", w)
	}
	opts := engine.SessionOptions{ContextPolicy: policy}
	if *noThink {
		f := false
		opts.EnableThinking = &f
	}
	s := m.NewSession(opts)
	var msgs []engine.Message
	if *system != "" {
		msgs = append(msgs, engine.Message{Role: engine.RoleSystem, Content: *system})
	}
	sp := engine.Sampling{Temperature: float32(*temp), TopP: float32(*topP), TopK: *topK, Seed: *seed, MaxTokens: *maxTokens}
	fmt.Fprintf(io.Err, "ready (%s). Type a message; /reset starts over, /exit or Ctrl-D quits, Ctrl-C stops an answer.\n", m.Backend())
	in := bufio.NewScanner(io.In)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for {
		fmt.Fprint(io.Out, "\n> ")
		if !in.Scan() {
			fmt.Fprintln(io.Out)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			msgs = msgs[:0]
			if *system != "" {
				msgs = append(msgs, engine.Message{Role: engine.RoleSystem, Content: *system})
			}
			fmt.Fprintln(io.Err, "(conversation cleared)")
			continue
		}
		msgs = append(msgs, engine.Message{Role: engine.RoleUser, Content: line})
		res, err := answer(ctx, s, msgs, sp, io)
		if errors.Is(err, engine.ErrContextFull) {
			// The chat goes on: the message is not kept, and the user decides.
			msgs = msgs[:len(msgs)-1]
			fmt.Fprintf(io.Err, "(context full: %v)\n(type /reset to start over, or restart with --context-full drop-oldest or a larger --max-context)\n", err)
			continue
		}
		if err != nil {
			return err
		}
		if res.Dropped > 0 {
			fmt.Fprintf(io.Err, "\n(context full: the oldest %d messages were left out of what the model sees; the system prompt was kept)", res.Dropped)
		}
		msgs = append(msgs, engine.Message{Role: engine.RoleAssistant, Content: res.Text, Thinking: res.Thinking})
		fmt.Fprintf(io.Err, "\n[%d tokens, %.1f tok/s, %s]\n", res.Timings.GeneratedTokens, res.Timings.DecodeTokensPerSec(), res.Stop)
		if res.Stop == engine.StopContext {
			fmt.Fprintf(io.Err, "(the context is full: the answer was cut there; %s)\n", map[engine.ContextPolicy]string{
				engine.ContextStop:       "type /reset to start over",
				engine.ContextDropOldest: "the next message leaves out the oldest turns",
			}[policy])
		}
		sp.Seed++
	}
}

// answer streams one reply; Ctrl-C stops the reply, not the program.
func answer(ctx context.Context, s *engine.Session, msgs []engine.Message, sp engine.Sampling, io IO) (engine.Result, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	thinking := false
	return s.Chat(ctx, msgs, sp, func(t engine.Token) {
		if t.Thinking != thinking {
			if t.Thinking {
				fmt.Fprint(io.Out, "(thinking) ")
			} else {
				fmt.Fprint(io.Out, "\n(answer) ")
			}
			thinking = t.Thinking
		}
		fmt.Fprint(io.Out, t.Text)
	})
}
