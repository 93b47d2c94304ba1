// Package cli holds Strata's headless subcommands (run, chat, eval, tokenize, hw, plan,
// profile, pack, bench, synth, pull, serve). Each command lives in its own file and talks to
// the engine only through its public API, like the GUI does; pull uses the Hugging Face client
// of app/library, serve the HTTP server of app/serve.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"
)

// IO is where a command reads and writes; tests pass buffers.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	Started  time.Time // when the process started, for ready-time measurements
}

// Stdio is the process's standard streams.
func Stdio() IO { return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Started: time.Now()} }

// start is when the process (or the test) began.
func (io IO) start() time.Time {
	if io.Started.IsZero() {
		return time.Now()
	}
	return io.Started
}

type command struct {
	name    string
	usage   string // argument synopsis, as DESIGN.md lists it
	summary string
	run     func(ctx context.Context, args []string, io IO) error
}

// commands is the table of subcommands; a function so the package holds no mutable state.
func commands() []command {
	return []command{
		{"run", "-m MODEL (-p TEXT | --tokens 1,2,3) [-n N] [--temp T] [--seed S] [--json]", "generate from a prompt", runRun},
		{"chat", "-m MODEL", "interactive terminal chat using the model's chat template", runChat},
		{"eval", "-m MODEL --tokens 1,2,3 --logits OUT.f32", "write the logits of every position (float32 LE, [n x vocab])", runEval},
		{"tokenize", "(-m MODEL | --tokenizer tokenizer.json[.gz]) [--special] [--json] (TEXT | --jsonl < lines | --decode 1,2,3)", "text to token ids and back", runTokenize},
		{"hw", "[-m MODEL] [--json]", "hardware report and the recommended mode", runHW},
		{"plan", "-m MODEL [knobs] [--json]", "which experts go to which tier, bytes per tier", runPlan},
		{"profile", "-m MODEL -o FILE", "routing-frequency profile from built-in prompts", runProfile},
		{"pack", "-m MODEL -o DIR", "write experts.bin (one aligned blob per expert)", runPack},
		{"bench", "-m MODEL [knobs] [--json]", "load time, prefill and decode tokens/s, hit rates", runBench},
		{"pull", "REPO[:FILE] [-o DIR]", "download a GGUF from Hugging Face (resumable, SHA-256 checked; HF_ENDPOINT, HF_TOKEN; or a catalogue id such as gpt-oss-20b)", runPull},
		{"serve", "-m MODEL [knobs] [--host 127.0.0.1] [--port 8080] [--api-key KEY]", "answer the OpenAI API (/v1/chat/completions, /v1/completions, /v1/models)", runServe},
		{"synth", "--arch qwen3moe|qwen35moe|qwen3next --preset NAME|--shape ... --quant TYPE -o FILE", "write a synthetic model with random weights", runSynth},
	}
}

// errUsage marks an error whose message is about how the command was called.
var errUsage = errors.New("usage")

// Main runs one command line and returns the process exit code.
func Main(args []string, io IO) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(io.Err)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	// Engine logs go to stderr at warning level unless STRATA_LOG=debug|info asks for more.
	level := slog.LevelWarn
	switch os.Getenv("STRATA_LOG") {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Err, &slog.HandlerOptions{Level: level})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], io)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(io.Err, "strata %s: %v\nusage: strata %s %s\n", c.name, err, c.name, c.usage)
			return 2
		default:
			fmt.Fprintf(io.Err, "strata %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(io.Err, "strata: unknown command %q\n\n", args[0])
	printUsage(io.Err)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Strata runs large Mixture-of-Experts models from a GGUF file.")
	fmt.Fprintln(w, "\nWith no arguments it opens the app. Headless commands:")
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  strata %-9s %s\n  %-16s %s\n", c.name, c.usage, "", c.summary)
	}
	fmt.Fprintln(w, "\nRun `strata COMMAND -h` for a command's flags.")
}

// usagef builds an errUsage with a message.
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// newFlags makes a FlagSet that reports errors instead of exiting.
func newFlags(name string, io IO) *flag.FlagSet {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	fs.SetOutput(io.Err)
	return fs
}

// parseFlags parses and refuses stray positional arguments unless allowed.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if !allowArgs && fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// parseIntList parses "1,2,3".
func parseIntList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var v int
		if _, err := fmt.Sscanf(f, "%d", &v); err != nil {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}
