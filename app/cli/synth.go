package cli

import (
	"context"
	"fmt"
	"time"

	"strata/engine/experts"
	"strata/engine/quant"
	"strata/engine/synth"
)

// runSynth writes a synthetic model: `strata synth --arch qwen3moe|gpt-oss|qwen35moe|qwen3next --preset NAME|--shape
// k=v,... --quant TYPE [--seed S] [--zipf S | --hot-quarter F] [--pool N] -o FILE`.
func runSynth(ctx context.Context, args []string, io IO) error {
	fs := newFlags("synth", io)
	arch := fs.String("arch", "qwen3moe", "architecture (qwen3moe, gpt-oss, qwen35moe, qwen3next)")
	preset := fs.String("preset", "", "tiny, 30b-a3b or 235b-a22b (qwen3moe), gptoss-20b or gptoss-120b (gpt-oss), qwen35-35b-a3b (qwen35moe), qwen3next-80b-a3b (qwen3next); with --shape alone, the arch's tiny is the base")
	shape := fs.String("shape", "", "overrides: layers,experts,experts_used,hidden,expert_ffn,ffn,heads,kv_heads,head_dim,vocab,context,rope_base,rms_eps=V,...")
	quantName := fs.String("quant", "", "type of the attention, expert, embedding and output matrices (q8_0, q4_0, q4_k, q6_k, mxfp4, iq3_xxs, iq2_xxs, iq2_xs, iq2_s, iq3_s, f16, f32, ...; for gpt-oss of the experts, beside Q8_0 attention); default: the preset's (q4_k; gpt-oss mxfp4)")
	seed := fs.Uint64("seed", 1, "random seed: the same seed gives the same bytes")
	zipf := fs.Float64("zipf", 0, "skew expert popularity per layer like a Zipf law with this exponent (0: none)")
	hotQuarter := fs.Float64("hot-quarter", 0, "balance each layer's router on strata profile's prompts so that the hottest quarter of its experts takes about this share of the routes, e.g. 0.4 for a trained model's balance (0: use --zipf)")
	pool := fs.Int("pool", -1, "build quantised matrices from this many distinct random blocks (0: quantise every block; -1: the preset's choice)")
	out := fs.String("o", "", "output GGUF file")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *out == "" {
		return usagef("-o FILE is required")
	}
	if *preset == "" && *shape == "" {
		return usagef("give --preset NAME or --shape k=v,...")
	}
	base := *preset
	if base == "" {
		base = "tiny"
	}
	spec, err := synth.PresetFor(*arch, base)
	if err != nil {
		return usagef("%v", err)
	}
	if err := spec.ApplyShape(*shape); err != nil {
		return usagef("%v", err)
	}
	if *quantName != "" {
		if spec.Quant, err = quant.ParseType(*quantName); err != nil {
			return usagef("--quant: %v", err)
		}
	}
	spec.Seed, spec.Zipf = *seed, *zipf
	if *hotQuarter != 0 {
		if err := balanceOnProfilePrompts(&spec, *hotQuarter, *zipf, io); err != nil {
			return err
		}
	}
	if *pool >= 0 {
		spec.Pool = *pool
	}
	if err := spec.Validate(); err != nil {
		return usagef("%v", err)
	}

	start := time.Now()
	lastPct := -1
	progress := func(done, total int64) {
		if pct := int(done * 100 / max(total, 1)); pct != lastPct {
			lastPct = pct
			fmt.Fprintf(io.Err, "\rsynth: %3d%%  %s / %s  %s", pct, synthSize(done), synthSize(total),
				time.Since(start).Round(time.Second))
		}
	}
	if err := synth.Write(ctx, *out, spec, progress); err != nil {
		fmt.Fprintln(io.Err)
		return err
	}
	fmt.Fprintf(io.Err, "\nsynth: wrote %s (%s, %s, seed %d) in %s\n", *out, spec.Name, spec.Quant, spec.Seed,
		time.Since(start).Round(time.Millisecond))
	return nil
}

// balanceOnProfilePrompts sets spec to balance its routers so that the hottest quarter of
// each layer's experts takes share of the routes of the prompts strata profile runs: the
// routes it measures. It says the share and the popularity exponent it aims at.
func balanceOnProfilePrompts(spec *synth.Spec, share, zipf float64, io IO) error {
	if zipf != 0 {
		return usagef("give --zipf or --hot-quarter, not both")
	}
	if !(share > 0 && share < 1) {
		return usagef("--hot-quarter %g: want a share between 0 and 1", share)
	}
	spec.HotQuarter, spec.Reference = share, experts.Prompts()
	if err := spec.Validate(); err != nil {
		return usagef("%v", err)
	}
	exp, err := synth.PopularityExponent(share, spec.Experts)
	if err != nil {
		return usagef("--hot-quarter: %v", err)
	}
	fmt.Fprintf(io.Err, "synth: --hot-quarter %g: aiming the hottest quarter of each layer's experts at %.1f%% of the routes of the %d profile prompts: routers balanced to a Zipf exponent of %.3f, adjusted per layer to what the balance reaches\n",
		share, 100*share, len(spec.Reference), exp)
	return nil
}

// synthSize formats n as MB below a gigabyte and GB above.
func synthSize(n int64) string {
	if n < 1e9 {
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
