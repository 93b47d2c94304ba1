package engine_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine"
	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
	"strata/engine/sample"
	"strata/engine/synth"
)

// gptOssTierModes are the tier modes a gpt-oss model runs in on a GPU, with a quarter of
// its experts in VRAM slots: misses on the CPU, the tiered mode with a host budget that pins
// some of the rest and leaves others cold (read around the page cache for a prompt), the
// tiered mode with pinned misses read over PCIe, the resident mode, and adaptive swaps.
func gptOssTierModes(slots int, hostGiB float64) []struct {
	name string
	edit func(*engine.Config)
} {
	return []struct {
		name string
		edit func(*engine.Config)
	}{
		{"cache + CPU misses", func(c *engine.Config) { c.ExpertCache = slots }},
		{"tiered, pinned + cold", func(c *engine.Config) { c.ExpertCache, c.TieredExperts, c.HostBudgetGiB = slots, true, hostGiB }},
		{"tiered, pcie-frac 0.5", func(c *engine.Config) { c.ExpertCache, c.TieredExperts, c.PCIeFrac = slots, true, 0.5 }},
		{"tiered, pcie-frac 1", func(c *engine.Config) { c.ExpertCache, c.TieredExperts, c.PCIeFrac = slots, true, 1 }},
		{"resident", func(c *engine.Config) { c.ExpertCache, c.ResidentExperts = slots, true }},
		{"tiered + adaptive swaps", func(c *engine.Config) { c.ExpertCache, c.TieredExperts, c.AdaptEvery = slots, true, 4 }},
	}
}

// tierRun is one open's greedy tokens, its teacher-forced logits of prompt+forced, and the
// tier map after.
type tierRun struct {
	tokens []int
	logits []float32
	snap   engine.TierSnapshot
}

func openAndRun(t *testing.T, path string, prefill int, prompt, forced []int, n int, edit func(*engine.Config)) tierRun {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.MaxContext, cfg.LearnProfile = "cuda", 256, false
	if prefill > 0 {
		cfg.Prefill = prefill
	}
	edit(&cfg)
	m, err := engine.Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var r tierRun
	s := m.NewSession(engine.SessionOptions{})
	if n > 0 {
		res, err := s.Generate(context.Background(), prompt, engine.Sampling{MaxTokens: n, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.tokens = res.Tokens
	}
	if forced == nil {
		forced = r.tokens
	}
	if err := s.Eval(context.Background(), append(slices.Clone(prompt), forced...), func(_ int, l []float32) { r.logits = append(r.logits, l...) }); err != nil {
		t.Fatal(err)
	}
	r.snap = m.Tiers()
	return r
}

// topGaps is each row's top-1 minus top-2 logit.
func topGaps(logits []float32, vocab int) []float64 {
	var gaps []float64
	for r := 0; r+vocab <= len(logits); r += vocab {
		row := logits[r : r+vocab]
		a := sample.Argmax(row)
		second := math.Inf(-1)
		for i, v := range row {
			if i != a {
				second = math.Max(second, float64(v))
			}
		}
		gaps = append(gaps, float64(row[a])-second)
	}
	return gaps
}

// TestGptOssTierModesOnGPU: on a gptoss-20b-shaped synth (hidden and expert FFN 2880, MXFP4
// experts with biases; 4 layers of 16 experts and a small vocabulary, so it is written in
// seconds), every tier mode stays within the 8-bit rule (gptoss-tiny's int8_activations
// RMS(Δ)/std) of the whole model in VRAM, token by token (--prefill 1: decode with the
// misses on the CPU, pinned slots, over PCIe) and as a 48-token batch (the misses streamed
// through the ring from pinned slots, the file, or read around the page cache). The paths
// do not compute the same arithmetic (the CPU's misses sum in another order and quantise
// their own activations; an H200 run measured 0.0013-0.014 RMS(Δ)/std), so a row's argmax
// and a greedy token may differ only where all-VRAM's top-2 gap is below twice the largest
// logit difference (the README's top-1 rule). This synthetic model's random weights leave
// near ties every few tokens, so the prompt is the candidate whose reference margins over
// the greedy steps are widest. It skips without a driver.
func TestGptOssTierModesOnGPU(t *testing.T) {
	skipWithoutGPU(t)
	spec, err := synth.PresetFor("gpt-oss", "gptoss-20b")
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.ApplyShape("layers=4,experts=16,vocab=4096"); err != nil {
		t.Fatal(err)
	}
	spec.Pool = 1 << 12
	path := filepath.Join(t.TempDir(), "g.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	maxRelTier := fixtures.LoadReference(t, "gptoss-tiny").Tolerances.Int8.RMSOverStd
	const (
		gen     = 12
		promptN = 48 // streams (at least engine's streamMinTokens)
	)
	V := spec.Vocab
	slots := spec.Layers * spec.Experts / 4
	blob := float64(3*spec.Hidden*spec.ExpertFFN) * 17 / 32 // MXFP4 bytes of one expert
	hostGiB := (float64(spec.Layers*spec.Experts)/4*blob + 96<<20) / (1 << 30)

	// The prompt: the candidate with the widest smallest reference margin over its greedy steps.
	var prompt, want []int
	var wantLogits []float32
	var gaps []float64
	best := -1.0
	for c := range 8 {
		p := make([]int, 24)
		for i := range p {
			p[i] = (i*131 + c*977 + 7) % V
		}
		ref := openAndRun(t, path, 1, p, nil, gen, func(*engine.Config) {})
		g := topGaps(ref.logits, V)
		m := slices.Min(g[len(p)-1 : len(p)-1+gen])
		t.Logf("candidate %d: smallest reference margin over the %d greedy steps %.4f", c, gen, m)
		for k, tok := range ref.tokens {
			if a := sample.Argmax(ref.logits[(len(p)-1+k)*V : (len(p)+k)*V]); a != tok {
				t.Errorf("candidate %d: all in VRAM chose %d at step %d, its teacher-forced logits %d", c, tok, k, a)
			}
		}
		if m > best {
			best, prompt, want, wantLogits, gaps = m, p, ref.tokens, ref.logits, g
		}
	}
	long := make([]int, promptN)
	for i := range long {
		long[i] = (i*37 + 11) % V
	}
	batchRef := openAndRun(t, path, 0, long, nil, 0, func(*engine.Config) {})
	batchGaps := topGaps(batchRef.logits, V)

	for _, mode := range gptOssTierModes(slots, hostGiB) {
		t.Run(mode.name, func(t *testing.T) {
			got := openAndRun(t, path, 1, prompt, want, gen, mode.edit)
			maxAbs := checkRows(t, "decode", got.logits, wantLogits, gaps, V, maxRelTier)
			for k := range min(len(got.tokens), len(want)) {
				if got.tokens[k] == want[k] {
					continue
				}
				if margin := gaps[len(prompt)-1+k]; margin >= 2*maxAbs {
					t.Errorf("greedy tokens %v, all in VRAM %v: parted at step %d, where the reference margin %.4f is above twice the largest logit difference %.3g", got.tokens, want, k, margin, maxAbs)
				} else {
					t.Logf("parted from all in VRAM at step %d, a near tie (margin %.4f, largest logit difference %.3g)", k, margin, maxAbs)
				}
				break
			}
			if len(got.tokens) != len(want) {
				t.Errorf("%d greedy tokens, want %d", len(got.tokens), len(want))
			}
			c := got.snap.Cache
			if c == nil || got.snap.DecodeHitsPerTier[engine.TierVRAM] == 0 {
				t.Fatalf("want decode hits in VRAM slots: cache %+v, decode hits %v", c, got.snap.DecodeHitsPerTier)
			}
			t.Logf("decode: hits %v, pinned slots %d, pcie %d, swaps %d", got.snap.DecodeHitsPerTier, c.PinnedSlots, c.PCIeReads, got.snap.Swaps)

			b := openAndRun(t, path, 0, long, nil, 0, mode.edit)
			checkRows(t, "batch", b.logits, batchRef.logits, batchGaps, V, maxRelTier)
			bc := b.snap.Cache
			if bc.Streamed == 0 {
				t.Error("the batch streamed no expert through the ring")
			}
			t.Logf("batch: hits %v, streamed %d (cold reads %d, rounds overlapped %d), pinned slots %d, notes %q", b.snap.HitsPerTier, bc.Streamed, bc.ColdReads, bc.OverlappedRounds, bc.PinnedSlots, bc.Notes)
			if mode.name == "tiered, pinned + cold" && (bc.PinnedSlots == 0 || b.snap.HitsPerTier[engine.TierCold] == 0 || (bc.ColdReads == 0 && len(bc.Notes) == 0)) {
				t.Errorf("host budget %.2f GiB: %d pinned slots, %d cold hits, %d cold reads (notes %q); want pinned and cold experts, the cold ones read around the page cache or a note why not", hostGiB, bc.PinnedSlots, b.snap.HitsPerTier[engine.TierCold], bc.ColdReads, bc.Notes)
			}
		})
	}
}

// checkRows holds got to all-VRAM's want: RMS(Δ)/std ≤ maxRel, and the argmax equal
// wherever want's top-2 gap exceeds twice the largest difference. It returns that
// difference.
func checkRows(t *testing.T, what string, got, want []float32, gaps []float64, vocab int, maxRel float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	maxAbs, rel := modeltest.Compare(got, want)
	flips := ""
	for r := range len(want) / vocab {
		g, w := got[r*vocab:(r+1)*vocab], want[r*vocab:(r+1)*vocab]
		if sample.Argmax(g) != sample.Argmax(w) {
			flips += fmt.Sprintf(" row %d (gap %.4f)", r, gaps[r])
			if gaps[r] > 2*maxAbs {
				t.Errorf("%s: row %d: argmax %d, all in VRAM %d where its gap %.4f is above twice the largest difference %.3g", what, r, sample.Argmax(g), sample.Argmax(w), gaps[r], maxAbs)
			}
		}
	}
	t.Logf("%s: RMS(Δ)/std %.3g, max |Δ| %.3g; argmax differs at:%s", what, rel, maxAbs, flips)
	if rel > maxRel || math.IsNaN(rel) {
		t.Errorf("%s: RMS(Δ)/std %.3g from all in VRAM, limit %g", what, rel, maxRel)
	}
	return maxAbs
}
