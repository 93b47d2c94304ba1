package cli

import (
	"cmp"
	"context"
	"fmt"
	"math"
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
	if per := layerHotQuarter(p); len(per) > 0 {
		out += quarterByLayer(per, p.Experts/4)
	}
	out += "hottest experts:"
	for _, id := range rank[:min(5, len(rank))] {
		out += fmt.Sprintf(" L%d/E%d %.2f%%", id.Layer, id.Expert, 100*float64(p.Count[id.Layer*p.Experts+id.Expert])/float64(total))
	}
	return out + "\n"
}

// layerHotQuarter is each layer's hottest-quarter share: the routes its experts/4 most
// routed experts take of the layer's routes (NaN for a layer with none). Synth's
// --hot-quarter aims at this per layer; the ranking above mixes the layers, so a deep
// model whose later layers skew hides them behind its overall share. Nil below 4 experts.
func layerHotQuarter(p *experts.Profile) []float64 {
	hot := p.Experts / 4
	if hot < 1 {
		return nil
	}
	per := make([]float64, p.Layers)
	for l := range per {
		c := slices.Clone(p.Count[l*p.Experts : (l+1)*p.Experts])
		slices.SortFunc(c, func(a, b uint64) int { return cmp.Compare(b, a) })
		var sum, top uint64
		for i, v := range c {
			sum += v
			if i < hot {
				top += v
			}
		}
		per[l] = math.NaN()
		if sum > 0 {
			per[l] = float64(top) / float64(sum)
		}
	}
	return per
}

// quarterByLayer prints the per-layer shares: the least and most skewed layer, the
// median, and every layer's share in layer order.
func quarterByLayer(per []float64, hot int) string {
	type ls struct {
		layer int
		share float64
	}
	var seen []ls
	for l, s := range per {
		if !math.IsNaN(s) {
			seen = append(seen, ls{l, s})
		}
	}
	if len(seen) == 0 {
		return ""
	}
	slices.SortStableFunc(seen, func(a, b ls) int { return cmp.Compare(a.share, b.share) })
	lo, hi, mid := seen[0], seen[len(seen)-1], seen[len(seen)/2]
	out := fmt.Sprintf("hottest quarter per layer (%d experts each): min %.1f%% (L%d), median %.1f%%, max %.1f%% (L%d)\n",
		hot, 100*lo.share, lo.layer, 100*mid.share, 100*hi.share, hi.layer)
	out += "by layer (%):"
	for _, s := range per {
		if math.IsNaN(s) {
			out += " -"
		} else {
			out += fmt.Sprintf(" %.1f", 100*s)
		}
	}
	return out + "\n"
}
