package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/synth"
	"strata/platform"
)

// bigArenaModel writes a small synthetic qwen3moe whose experts (about 81 MiB) do not fit a
// pinned budget of 64 MiB, while its forward pass stays cheap.
func bigArenaModel(t *testing.T) (path string, arena int64) {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Experts, spec.ExpertsUsed = 32, 2
	spec.Hidden, spec.ExpertFFN, spec.FFN = 512, 1536, 1536
	spec.Heads, spec.HeadDim = 8, 64
	spec.Pool = 256
	path = filepath.Join(t.TempDir(), "arena.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := describe(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := expertShape(f, info)
	if err != nil {
		t.Fatal(err)
	}
	return path, experts.ArenaBytes(s, s.Count())
}

// captureLog sends slog's output to a buffer for the rest of the test.
func captureLog(t *testing.T) *lockedBuffer {
	t.Helper()
	buf := &lockedBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns what was logged since the last call.
func (l *lockedBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

func greedy(t *testing.T, m *Model) []int {
	t.Helper()
	res, err := m.NewSession(SessionOptions{}).Generate(context.Background(), []int{10, 200, 31, 4, 77, 150, 9}, Sampling{MaxTokens: 8, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tokens
}

// TestPinnedBudgetOnTheCPU: with every expert in the resident RAM arena, a pinned budget
// that holds the arena locks it as before; one of 64 MiB, smaller than the arena, keeps it
// in plain RAM with one log line naming the budget, the tier map and the snapshot say
// "not pinned", and the greedy tokens are those of the start without a budget.
func TestPinnedBudgetOnTheCPU(t *testing.T) {
	path, arena := bigArenaModel(t)
	if arena <= 64<<20 || arena > 256<<20 {
		t.Fatalf("the test model's arena is %d MiB; it must be over 64 and at most 256", arena>>20)
	}
	logs := captureLog(t)
	var want []int
	for _, budget := range []int{0, 256, 64} {
		cfg := DefaultConfig()
		cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 64, false
		cfg.ResidentExperts, cfg.PinnedBudgetMiB = true, budget
		logs.take()
		m, err := Open(context.Background(), path, cfg, nil)
		if err != nil {
			t.Fatalf("budget %d MiB: %v", budget, err)
		}
		got := greedy(t, m)
		snap := m.Tiers()
		m.Close()
		log := logs.take()
		falls := strings.Count(log, "the pinned expert tier is not pinned")
		if budget == 0 {
			want = got
		} else if !slices.Equal(got, want) {
			t.Errorf("budget %d MiB: tokens %v, without a budget %v", budget, got, want)
		}
		c := snap.Cache
		if c == nil {
			t.Fatalf("budget %d MiB: no cache activity in the snapshot", budget)
		}
		var kinds []string
		for _, u := range snap.Memory {
			kinds = append(kinds, u.Kind)
		}
		if budget == 64 {
			if falls != 1 || !strings.Contains(log, "64 MiB (--pinned-budget-mib)") {
				t.Errorf("budget 64 MiB: %d fallback lines, want 1 naming the budget; log:\n%s", falls, log)
			}
			if c.ArenaNotPinned == "" || c.ArenaLocked || !slices.Contains(kinds, "not pinned") || c.PinnedBudget != 64<<20 || c.PinnedUsed != 0 {
				t.Errorf("budget 64 MiB: not pinned %q, locked %v, memory kinds %v, budget %d used %d", c.ArenaNotPinned, c.ArenaLocked, kinds, c.PinnedBudget, c.PinnedUsed)
			}
			continue
		}
		if falls != 0 || c.ArenaNotPinned != "" || !slices.Contains(kinds, "pinned") {
			t.Errorf("budget %d MiB: %d fallback lines, not pinned %q, memory kinds %v", budget, falls, c.ArenaNotPinned, kinds)
		}
		if c.PinnedUsed > 0 && c.PinnedUsed != arena {
			t.Errorf("budget %d MiB: %d bytes counted as pinned, the arena is %d", budget, c.PinnedUsed, arena)
		}
	}
}

// placeOnStandIn places the model as Open does on a GPU, with the CPU standing in for it
// (experts.HostDevice): a few VRAM slots, the rest of the experts in the pinned tier.
func placeOnStandIn(t *testing.T, path string, budgetMiB int) (*Model, error) {
	t.Helper()
	return placeOnStandIns(t, path, func(c *Config) { c.PinnedBudgetMiB = budgetMiB }, 0)
}

// placeOnStandIns is placeOnStandIn with edit applied to the config and helpers CPU
// stand-in helper GPUs.
func placeOnStandIns(t *testing.T, path string, edit func(*Config), helpers int) (*Model, error) {
	t.Helper()
	cfg := standInConfig()
	edit(&cfg)
	var hs []experts.Device
	for range helpers {
		h := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 1})}
		t.Cleanup(func() { h.Close() })
		hs = append(hs, h)
	}
	p, f, info, err := placeTiered(t, path, cfg, func(c *cpu.Backend) experts.Device { return experts.HostDevice{Backend: c} }, hs)
	if err != nil {
		return nil, err
	}
	m, err := openPlaced(context.Background(), f, cfg, info, p)
	if err != nil {
		p.close()
		f.Close()
		t.Fatal(err)
	}
	return m, nil
}

// standInConfig is the config the stand-in placements start from: experts tiered around 8
// VRAM slots, a 1 GiB pinned tier, a short context.
func standInConfig() Config {
	cfg := DefaultConfig()
	cfg.Threads, cfg.MaxContext, cfg.LearnProfile = 2, 64, false
	cfg.TieredExperts, cfg.ExpertCache, cfg.HostBudgetGiB = true, 8, 1
	return cfg
}

// placeTiered opens path unmapped and places it as tiered placement does on a GPU with 8 GiB
// free: on devOf's device (made from the placement's CPU backend) with helpers hs. On an
// error the placement and the file are closed; otherwise the caller owns them.
func placeTiered(t *testing.T, path string, cfg Config, devOf func(*cpu.Backend) experts.Device, hs []experts.Device) (*placement, *gguf.File, ModelInfo, error) {
	t.Helper()
	f, err := gguf.OpenUnmapped(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := describe(f)
	if err != nil {
		t.Fatal(err)
	}
	c := cpu.New(cpu.Options{Threads: 2})
	p := &placement{backend: c, pins: newPinBudget(cfg, platform.WSL{}, true)}
	if err := p.tiered(context.Background(), f, cfg, info, devOf(c), 8<<30, hs, func(Progress) {}); err != nil {
		p.close()
		f.Close()
		return nil, nil, info, err
	}
	return p, f, info, nil
}

// TestPinnedBudgetOnAStandInGPU: placed as on a GPU, a 36 MiB budget shrinks the staging
// ring to four buffers and leaves the pinned tier in plain RAM, one log line each, with the
// tokens of the start without a budget; a 1 MiB budget, which cannot hold even the smallest
// staging ring, fails with ErrBudgetTooSmall naming the budget and the knob to raise.
func TestPinnedBudgetOnAStandInGPU(t *testing.T) {
	path, _ := bigArenaModel(t)
	logs := captureLog(t)
	free, err := placeOnStandIn(t, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, free)
	if c := free.Tiers().Cache; c.ArenaNotPinned != "" || !c.ArenaLocked || c.PinnedSlots == 0 {
		t.Errorf("no budget: not pinned %q, locked %v, %d pinned slots", c.ArenaNotPinned, c.ArenaLocked, c.PinnedSlots)
	}
	free.Close()
	logs.take()

	m, err := placeOnStandIn(t, path, 36)
	if err != nil {
		t.Fatal(err)
	}
	got := greedy(t, m)
	c := m.Tiers().Cache
	m.Close()
	log := logs.take()
	if !slices.Equal(got, want) {
		t.Errorf("budget 36 MiB: tokens %v, without a budget %v", got, want)
	}
	for _, line := range []string{"holds 4 staging buffers of 8 MiB instead of 6", "the pinned expert tier is not pinned"} {
		if n := strings.Count(log, line); n != 1 {
			t.Errorf("budget 36 MiB: %q logged %d times, want once; log:\n%s", line, n, log)
		}
	}
	// The stand-in goes through tiered alone: the GPU's step-input area, which place takes
	// first, is not counted here.
	if c.ArenaNotPinned == "" || c.ArenaLocked || c.PinnedUsed != 4*stagingWantBufBytes {
		t.Errorf("budget 36 MiB: not pinned %q, locked %v, %d bytes counted", c.ArenaNotPinned, c.ArenaLocked, c.PinnedUsed)
	}

	_, err = placeOnStandIn(t, path, 1)
	if !errors.Is(err, ErrBudgetTooSmall) {
		t.Fatalf("budget 1 MiB: %v, want ErrBudgetTooSmall", err)
	}
	for _, s := range []string{"1 MiB (--pinned-budget-mib)", "raise --pinned-budget-mib to at least 2", "staging"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("budget 1 MiB: %q does not say %q", err, s)
		}
	}
}

// TestStagingForShrinks: the ring keeps its full size when the budget allows, then loses
// buffers, then shrinks them, and refuses below the smallest ring with the budget named.
func TestStagingForShrinks(t *testing.T) {
	for _, tc := range []struct {
		budgetMiB, bufs, bufBytes int
		fallback                  bool
	}{
		{0, stagingWantBufs, stagingWantBufBytes, false},
		{1024, stagingWantBufs, stagingWantBufBytes, false},
		{40, 5, stagingWantBufBytes, true},
		{36, 4, stagingWantBufBytes, true},
		{17, 2, stagingWantBufBytes, true},
		{10, 2, 4 << 20, true},
		{3, 2, 1 << 20, true},
		{2, 2, 1 << 20, true},
	} {
		b := newPinBudget(Config{PinnedBudgetMiB: tc.budgetMiB}, platform.WSL{}, true)
		bufs, size, fallback, err := stagingFor(&b)
		if err != nil || bufs != tc.bufs || size != tc.bufBytes || (fallback != "") != tc.fallback {
			t.Errorf("budget %d MiB: %d x %d bytes (fallback %q, err %v), want %d x %d", tc.budgetMiB, bufs, size, fallback, err, tc.bufs, tc.bufBytes)
		}
		if b.capped() && b.used > b.limit {
			t.Errorf("budget %d MiB: %d bytes taken", tc.budgetMiB, b.used)
		}
	}
	b := newPinBudget(Config{PinnedBudgetMiB: 1}, platform.WSL{}, true)
	if _, _, _, err := stagingFor(&b); !errors.Is(err, ErrBudgetTooSmall) || !strings.Contains(err.Error(), "1 MiB (--pinned-budget-mib)") {
		t.Errorf("budget 1 MiB: %v", err)
	}
	// The WSL2 default applies to GPU starts only, and a set knob wins.
	wsl := platform.WSL{WSL2: true, PinnedBudgetBytes: platform.WSLPinnedBudgetBytes}
	if b := newPinBudget(DefaultConfig(), wsl, true); b.limit != platform.WSLPinnedBudgetBytes {
		t.Errorf("WSL2 GPU start: budget %d", b.limit)
	}
	if b := newPinBudget(DefaultConfig(), wsl, false); b.capped() {
		t.Errorf("WSL2 CPU start: budget %d", b.limit)
	}
	if b := newPinBudget(Config{PinnedBudgetMiB: 128}, wsl, true); b.limit != 128<<20 {
		t.Errorf("WSL2 with --pinned-budget-mib 128: budget %d", b.limit)
	}
}

// TestHelpersOnStandIns: with --expert-cache-device1/2 the plan's helper tier reaches the
// expert cache on two CPU stand-in helper GPUs: the experts ranked after the main device's
// slots sit there, the helpers compute their hits, and the greedy tokens are those of the
// same start without helpers.
func TestHelpersOnStandIns(t *testing.T) {
	path, _ := bigArenaModel(t)
	plain, err := placeOnStandIns(t, path, func(*Config) {}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, plain)
	plain.Close()

	m, err := placeOnStandIns(t, path, func(c *Config) { c.ExpertCacheDevice1, c.ExpertCacheDevice2 = 6, 4 }, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := greedy(t, m); !slices.Equal(got, want) {
		t.Errorf("with helpers: tokens %v, without %v", got, want)
	}
	snap := m.Tiers()
	on := 0
	for _, row := range snap.Tier {
		for _, tier := range row {
			if tier == TierHelper {
				on++
			}
		}
	}
	if c := snap.Cache; on != 10 || c.HelperSlots != [2]int{6, 4} || snap.HitsPerTier[TierHelper] == 0 || c.VRAMSlots != 8 {
		t.Errorf("tier map: %d experts on helpers, helper slots %v, %d helper hits, %d VRAM slots", on, c.HelperSlots, snap.HitsPerTier[TierHelper], c.VRAMSlots)
	}
	if c := snap.Cache; c.HelperResults <= 0 || c.HelperResults > c.Helpers {
		t.Errorf("helper results took %v of the helpers' %v", c.HelperResults, c.Helpers)
	}
	// The memory bars show each helper's slots, in the helper tier's bytes.
	helperMem := map[string]int64{}
	for _, u := range snap.Memory {
		if u.Kind == "helper experts" {
			helperMem[u.Device] += u.Bytes
		}
	}
	if blob := snap.BytesPerTier[TierHelper] / 10; helperMem["helper gpu 1"] != 6*blob || helperMem["helper gpu 2"] != 4*blob || blob == 0 {
		t.Errorf("memory bars of the helpers %v, want 6 and 4 experts of %d bytes", helperMem, blob)
	}
	if _, err := placeOnStandIns(t, path, func(c *Config) { c.ExpertCacheDevice2 = 2 }, 1); err == nil || !strings.Contains(err.Error(), "helper GPU 2 is not open") {
		t.Errorf("helper 2 slots with one helper: %v", err)
	}
}

// TestHelpersUnderAPinnedBudget: with two CPU stand-in helper GPUs the helpers' staging rings
// and result rows count against the pinned budget. At 64 MiB every ring shrinks (the main
// card's leaves the helpers theirs) and the pinned tier stays in plain RAM, one log line
// each; at 7 MiB the result rows shrink to fewer tokens a round; both give the tokens of a
// start without helpers or budget. At 6 MiB not even one token's rows fit after the smallest
// rings: the error names the budget, the rows and the knob to raise.
func TestHelpersUnderAPinnedBudget(t *testing.T) {
	path, _ := bigArenaModel(t)
	logs := captureLog(t)
	plain, err := placeOnStandIns(t, path, func(*Config) {}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, plain)
	plain.Close()
	helpers := func(budget int) func(*Config) {
		return func(c *Config) { c.ExpertCacheDevice1, c.ExpertCacheDevice2, c.PinnedBudgetMiB = 6, 4, budget }
	}
	for _, tc := range []struct {
		budget int
		lines  []string // each logged exactly once
	}{
		{64, []string{
			"holds 2 staging buffers of 8 MiB instead of 6\"", "holds 2 staging buffers of 8 MiB instead of 6 for helper GPU 1",
			"holds 2 staging buffers of 8 MiB instead of 6 for helper GPU 2", "the pinned expert tier is not pinned",
		}},
		{7, []string{"the helper GPUs' results for 256 tokens at a time instead of 512"}},
	} {
		logs.take()
		m, err := placeOnStandIns(t, path, helpers(tc.budget), 2)
		if err != nil {
			t.Fatalf("budget %d MiB: %v", tc.budget, err)
		}
		got := greedy(t, m)
		c := m.Tiers().Cache
		hits := m.Tiers().HitsPerTier[TierHelper]
		m.Close()
		log := logs.take()
		if !slices.Equal(got, want) {
			t.Errorf("budget %d MiB: tokens %v, without helpers or a budget %v", tc.budget, got, want)
		}
		if hits == 0 || c.PinnedUsed > int64(tc.budget)<<20 {
			t.Errorf("budget %d MiB: %d helper hits, %d bytes pinned", tc.budget, hits, c.PinnedUsed)
		}
		for _, line := range tc.lines {
			if n := strings.Count(log, line); n != 1 {
				t.Errorf("budget %d MiB: %q logged %d times, want once; log:\n%s", tc.budget, line, n, log)
			}
		}
	}
	_, err = placeOnStandIns(t, path, helpers(6), 2)
	if !errors.Is(err, ErrBudgetTooSmall) {
		t.Fatalf("budget 6 MiB: %v, want ErrBudgetTooSmall", err)
	}
	for _, s := range []string{"6 MiB (--pinned-budget-mib)", "helper GPUs' result rows", "raise --pinned-budget-mib to at least 7"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("budget 6 MiB: %q does not say %q", err, s)
		}
	}
}

// recordPlacer records the tensors it is asked to keep in pinned host memory.
type recordPlacer struct{ names []string }

func (r *recordPlacer) PlaceInHost(name string) { r.names = append(r.names, name) }

// TestEmbeddingsInHostFallBack: on a GPU the token-embedding table goes to pinned host memory
// when the pinned budget holds it (counted there), and stays in VRAM with one note naming
// the budget when it does not; a model whose output layer shares the table keeps it in VRAM
// without a note.
func TestEmbeddingsInHostFallBack(t *testing.T) {
	path, _ := bigArenaModel(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, ok := f.Tensor("token_embd.weight")
	if _, out := f.Tensor("output.weight"); !ok || !out {
		t.Fatalf("the synth has token_embd %v and output.weight %v", ok, out)
	}
	logs := captureLog(t)
	for _, tc := range []struct {
		budget int64 // bytes
		inHost bool
	}{{0, true}, {ti.Size + 4096, true}, {ti.Size - 1, false}} {
		p := &placement{pins: pinBudget{limit: tc.budget, source: "--pinned-budget-mib"}}
		var r recordPlacer
		logs.take()
		p.embeddingsInHost(f, &r)
		log := logs.take()
		if got := len(r.names) == 1 && r.names[0] == "token_embd.weight"; got != tc.inHost {
			t.Errorf("budget %d: placed in host %v, want %v", tc.budget, r.names, tc.inHost)
		}
		if tc.inHost && (p.embdInHost != ti.Size || p.pins.used != ti.Size) {
			t.Errorf("budget %d: %d bytes in host, %d counted, the table is %d", tc.budget, p.embdInHost, p.pins.used, ti.Size)
		}
		if n := strings.Count(log, "the token-embedding table stays in the main card's VRAM"); n != map[bool]int{true: 0, false: 1}[tc.inHost] || (!tc.inHost && !strings.Contains(log, "(--pinned-budget-mib)")) {
			t.Errorf("budget %d: %d fallback lines; log:\n%s", tc.budget, n, log)
		}
	}
}

// TestForceWSL2: STRATA_FORCE_WSL2=1 makes Open see WSL2, so a GPU start takes the driver's
// pinned budget without the knob.
func TestForceWSL2(t *testing.T) {
	t.Setenv(forceWSL2Env, "1")
	w := detectWSL()
	if b := newPinBudget(DefaultConfig(), w, true); !w.WSL2 || b.limit != platform.WSLPinnedBudgetBytes || b.source != defaultWSLBudgetNote {
		t.Errorf("forced WSL2: %+v, budget %+v", w, b)
	}
}
