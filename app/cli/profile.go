package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"strata/engine"
	"strata/engine/experts"
)

func runProfile(ctx context.Context, args []string, io IO) error {
	fs := newFlags("profile", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	out := fs.String("o", "", "profile file to write (default: next to the model, else the user cache folder, where the engine looks)")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	// This command writes the profile itself; the engine learning the same routes on Close
	// would count them twice.
	cfg.LearnProfile = false
	m, err := engine.Open(ctx, *modelPath, cfg, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	start := time.Now()
	prompts := experts.Prompts()
	p, err := engine.ProfileModel(ctx, m, prompts, func(done, total int) {
		fmt.Fprintf(io.Err, "\rprofiling: %d/%d prompts", done, total)
	})
	fmt.Fprintln(io.Err)
	if err != nil {
		return err
	}
	took := time.Since(start)
	where := *out
	if where == "" {
		if where, err = experts.SaveProfile(p, *modelPath); err != nil {
			return err
		}
	} else if err := p.Save(where); err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "profile of %d tokens (%d prompts, %.1fs, %.1f tokens/s) written to %s\n",
		p.Tokens, len(prompts), took.Seconds(), float64(p.Tokens)/max(took.Seconds(), 1e-9), where)
	if !slices.Contains(experts.ProfilePaths(*modelPath, p.Key), where) {
		fmt.Fprintf(io.Out, "the engine loads this model's profile from %s; move it there to use it\n", strings.Join(experts.ProfilePaths(*modelPath, p.Key), " or "))
	}
	fmt.Fprint(io.Out, profileShares(p))
	return nil
}

// profileShares says how concentrated the routing is: the share of all routes the hottest
// tenth, quarter and half of the experts take, and the hottest few.
func profileShares(p *experts.Profile) string {
	var total uint64
	for _, c := range p.Count {
		total += c
	}
	if total == 0 {
		return "no routes were recorded\n"
	}
	rank := p.Rank()
	share := func(n int) float64 {
		var s uint64
		for _, id := range rank[:n] {
			s += p.Count[id.Layer*p.Experts+id.Expert]
		}
		return 100 * float64(s) / float64(total)
	}
	out := ""
	for _, frac := range []struct {
		name string
		div  int
	}{{"tenth", 10}, {"quarter", 4}, {"half", 2}} {
		n := max(len(rank)/frac.div, 1)
		out += fmt.Sprintf("hottest %s of the experts (%d): %.1f%% of routes\n", frac.name, n, share(n))
	}
	out += "hottest experts:"
	for _, id := range rank[:min(5, len(rank))] {
		out += fmt.Sprintf(" L%d/E%d %.2f%%", id.Layer, id.Expert, 100*float64(p.Count[id.Layer*p.Experts+id.Expert])/float64(total))
	}
	return out + "\n"
}
