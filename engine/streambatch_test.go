package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/model/modeltest"
	"strata/engine/sample"
)

// streamRig plans with the tiny synth model's activations and expert size, but as many
// layers as the 2% rule needs slots: the tiny model's 16 experts cost far more than 2% of
// any cache for a larger batch.
type streamRig struct {
	f    *gguf.File
	h    model.Hparams
	info ModelInfo
	s    experts.Shape
	acts map[int]int64 // act's, by batch
}

// newStreamRig opens the tiny synth model and measures its activations for the batches the
// tests plan with.
func newStreamRig(t *testing.T) streamRig {
	t.Helper()
	f, err := gguf.Open(synthModel(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	info, errInfo := describe(f)
	h, errH := model.ReadHparams(f)
	s, errShape := expertShape(f, info)
	if err := errors.Join(errInfo, errH, errShape); err != nil {
		t.Fatal(err)
	}
	r := streamRig{f: f, h: h, info: info, s: s, acts: map[int]int64{}}
	for _, b := range append(streamBatches(), defaultPrefill, defaultPrefill/2, 4096) {
		bp, err := planAt(f, h, r.input(rigConfig(), 1<<40), b, true)
		if err != nil {
			t.Fatal(err)
		}
		r.acts[b] = bp.plan.ActivationBytes
	}
	// Twice the slots a cache that affords the largest batch holds.
	r.s.Layers = (2*(100/streamSlotSharePct)*r.cost(streamBatches()[0]) + s.Experts - 1) / s.Experts
	return r
}

// input is the planner's input for cfg with gpuFree bytes of VRAM.
func (r streamRig) input(cfg Config, gpuFree int64) experts.PlanInput {
	return planInput(r.info, r.s, gpuFree, 64<<30, cfg, nil)
}

// act is what a plan keeps for the activations of batches of b tokens, the ring included.
func (r streamRig) act(b int) int64 { return r.acts[b] }

// cost is the expert slots batches of b tokens take beyond the default batch's.
func (r streamRig) cost(b int) int {
	blob := r.s.BlobBytes()
	return int((r.act(b) - r.act(defaultPrefill) + blob - 1) / blob)
}

// freeFor is the free VRAM that leaves slots expert slots beside batches of b tokens.
func (r streamRig) freeFor(b, slots int) int64 {
	in := r.input(rigConfig(), 1)
	return in.NonExpertBytes + int64(in.MinContext)*in.KVBytesPerToken + r.act(b) + int64(slots)*r.s.BlobBytes()
}

// rigConfig is --prefill auto with the pinned tier, a 1024-token context and no reserve.
func rigConfig() Config {
	cfg := DefaultConfig()
	cfg.MaxContext, cfg.VRAMReserveMiB, cfg.TieredExperts = 1024, 0, true
	return cfg
}

// TestStreamBatchChoice: with --prefill auto on a GPU whose plan streams experts, a plan
// takes batches of 2048 or 1024 tokens when their activations cost at most
// streamSlotSharePct of the 512-token plan's expert slots, and says so; every expert in
// VRAM, one on a helper GPU, --prefill N, slots by number, a tight budget and the CPU keep
// today's batch.
func TestStreamBatchChoice(t *testing.T) {
	r := newStreamRig(t)
	large, small := streamBatches()[0], streamBatches()[1]
	pct := 100 / streamSlotSharePct // a cache this many times a batch's cost affords it
	count := r.s.Count()
	for _, tc := range []struct {
		name string
		edit func(*Config)
		free int64
		want int
	}{
		{"streaming, room for the largest", nil, r.freeFor(defaultPrefill, pct*r.cost(large)), large},
		{"streaming, room for the smaller", nil, r.freeFor(defaultPrefill, pct*r.cost(small)), small},
		{"streaming, one slot short", nil, r.freeFor(defaultPrefill, pct*r.cost(small)-1), defaultPrefill},
		{"every expert in VRAM", nil, r.freeFor(defaultPrefill, count+pct*r.cost(large)), defaultPrefill},
		{"the rest on a helper", func(c *Config) { c.ExpertCacheDevice1 = count }, r.freeFor(defaultPrefill, pct*r.cost(large)), defaultPrefill},
		{"--prefill 256", func(c *Config) { c.Prefill = 256 }, r.freeFor(defaultPrefill, pct*r.cost(large)), 256},
		{"--prefill 4096", func(c *Config) { c.Prefill = 4096 }, r.freeFor(4096, pct*r.cost(large)), 4096},
		{"--expert-cache 100", func(c *Config) { c.ExpertCache = 100 }, r.freeFor(defaultPrefill, pct*r.cost(large)), defaultPrefill},
		{"tight VRAM", nil, r.freeFor(defaultPrefill/2, 0), defaultPrefill / 2},
		{"no GPU", nil, 0, defaultPrefill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rigConfig()
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			bp, err := planBatch(r.f, r.h, r.input(cfg, tc.free), cfg, tc.free > 0)
			if err != nil {
				t.Fatal(err)
			}
			if bp.batch != tc.want || bp.plan.Batch != tc.want {
				t.Fatalf("batch %d (plan %d), want %d; %d of %d slots, notes %q", bp.batch, bp.plan.Batch, tc.want, bp.plan.Slots, count, bp.plan.Notes)
			}
			if tc.free > 0 && bp.plan.ActivationBytes != r.act(tc.want) {
				t.Errorf("activations %d, batches of %d take %d", bp.plan.ActivationBytes, tc.want, r.act(tc.want))
			}
			streams := strings.Contains(strings.Join(bp.plan.Notes, "\n"), "while experts stream")
			if tc.want > defaultPrefill && tc.edit == nil && !streams {
				t.Errorf("the notes do not say why batches of %d: %q", tc.want, bp.plan.Notes)
			}
		})
	}
}

// TestSlotsAfford: a larger batch may give up streamSlotSharePct percent of the default
// batch's slots, rounded down to whole slots, and not one more.
func TestSlotsAfford(t *testing.T) {
	for _, base := range []int{0, 1, 49, 50, 51, 100, 4695, 10454} {
		most := base * streamSlotSharePct / 100 // whole slots within the share
		if !slotsAfford(base, base) {
			t.Errorf("base %d: a batch that costs no slot is refused", base)
		}
		if !slotsAfford(base, base-most) {
			t.Errorf("base %d: %d fewer slots (%d%%) refused", base, most, streamSlotSharePct)
		}
		if slotsAfford(base, base-most-1) {
			t.Errorf("base %d: %d fewer slots (more than %d%%) allowed", base, most+1, streamSlotSharePct)
		}
	}
	if slotsAfford(0, -1) {
		t.Error("a plan of negative slots is afforded")
	}
}

// TestStreamingBatchMatchesSmallBatches: the prefill path is the same for every batch, so
// a prompt run in batches of the larger sizes gives every position the logits and the
// greedy token of batches of 512 and of 256 (on this model the three agree to 1e-6). It
// runs on the CPU standing in for the GPU, through the tiered expert cache with half the
// experts streamed through the ring, so every batch streams.
func TestStreamingBatchMatchesSmallBatches(t *testing.T) {
	path := synthModel(t)
	n := streamBatches()[0] + defaultPrefill + 37 // several batches and a remainder for each
	smaller := []int{defaultPrefill, defaultPrefill / 2}
	var want [][][]float32
	for _, b := range smaller {
		want = append(want, evalInBatches(t, path, b, n))
	}
	for _, b := range streamBatches() {
		got := evalInBatches(t, path, b, n)
		for k, w := range want {
			for pos := range got {
				if d := modeltest.MaxAbsDiff(got[pos], w[pos]); d > 1e-4 || sample.Argmax(got[pos]) != sample.Argmax(w[pos]) {
					t.Fatalf("batches of %d against %d: position %d: max |Δ| %.3g, greedy %d, want %d", b, smaller[k], pos, d, sample.Argmax(got[pos]), sample.Argmax(w[pos]))
				}
			}
		}
	}
}

// evalInBatches is every position's logits of an n-token prompt run in batches of b on the
// CPU standing in for a GPU, whose expert cache streams the experts it does not hold.
func evalInBatches(t *testing.T, path string, b, n int) [][]float32 {
	t.Helper()
	m, err := placeOnStandIns(t, path, func(c *Config) { c.Prefill, c.MaxContext = b, n }, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config().Prefill != b {
		t.Fatalf("--prefill %d ran batches of %d", b, m.Config().Prefill)
	}
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % m.Info().Vocab
	}
	got := make([][]float32, n)
	err = m.NewSession(SessionOptions{}).Eval(context.Background(), prompt, func(pos int, l []float32) { got[pos] = append([]float32(nil), l...) })
	if err != nil {
		t.Fatal(err)
	}
	if m.Tiers().Cache.Streamed == 0 {
		t.Errorf("batches of %d streamed no expert", b)
	}
	return got
}
