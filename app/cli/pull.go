package cli

import (
	"context"
	"fmt"
	"time"

	"strata/app/library"
	"strata/app/store"
)

// runPull downloads a GGUF model from Hugging Face: `strata pull REPO[:FILE] [-o DIR]`,
// with the checks and resume of the app's library (app/library: HF_ENDPOINT and HF_TOKEN
// are honoured). Progress goes to stderr; the path of the model to open to stdout.
func runPull(ctx context.Context, args []string, io IO) error {
	return pull(ctx, args, io, library.NewClient())
}

// pull is runPull with the client given, for tests.
func pull(ctx context.Context, args []string, io IO, c *library.Client) error {
	fs := newFlags("pull", io)
	dir := fs.String("o", "", "folder to download into (default: the app's models folder)")
	var ref string
	// The reference may come before or after -o.
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		ref, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, ref == ""); err != nil {
		return err
	}
	if ref == "" {
		if fs.NArg() != 1 {
			return usagef("want one REPO[:FILE], e.g. unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF:Q4_K_M")
		}
		ref = fs.Arg(0)
	}
	repo, file, err := library.ParseRef(ref)
	if err != nil {
		return usagef("%v", err)
	}
	if *dir == "" {
		var s store.Settings
		if cfg, err := store.ConfigDir(); err == nil {
			s, _ = store.LoadSettings(store.SettingsPath(cfg))
		}
		if *dir, err = library.ModelsDir(s); err != nil {
			return err
		}
	}
	files, err := c.Files(ctx, repo)
	if err != nil {
		return err
	}
	m, err := library.Choose(repo, library.GGUFModels(files), file)
	if err != nil {
		return err
	}
	if missing := library.Missing(*dir, m); missing < m.Size() && missing > 0 {
		fmt.Fprintf(io.Err, "pull: resuming %s: %s of %s left\n", m.Name, library.HumanBytes(missing), library.HumanBytes(m.Size()))
	} else if missing > 0 {
		fmt.Fprintf(io.Err, "pull: %s from %s (%s", m.Name, repo, library.HumanBytes(m.Size()))
		if len(m.Parts) > 1 {
			fmt.Fprintf(io.Err, " in %d parts", len(m.Parts))
		}
		fmt.Fprintf(io.Err, ") into %s\n", *dir)
	}
	start := time.Now()
	path, err := c.Download(ctx, repo, m, *dir, func(p library.Progress) {
		line := fmt.Sprintf("\rpull: %5.1f%%  %s / %s", 100*p.Fraction(), library.HumanBytes(p.Done), library.HumanBytes(p.Total))
		if p.BytesPerSec > 0 {
			line += fmt.Sprintf("  %s/s", library.HumanBytes(int64(p.BytesPerSec)))
		}
		if p.Left > 0 {
			line += fmt.Sprintf("  %s left", p.Left.Round(time.Second))
		}
		fmt.Fprintf(io.Err, "%-70s", line)
	})
	fmt.Fprintln(io.Err)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "pull: done in %s, SHA-256 checked\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(io.Out, path)
	return nil
}
