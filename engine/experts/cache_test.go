package experts_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"strata/engine/compute/cpu"
	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/model/modeltest"
)

// tierCase is one placement of the experts the cache is tested with.
type tierCase struct {
	name        string
	vram, pin   float64 // shares of the experts (by neutral rank) in VRAM and pinned slots
	helper      float64 // share after those on two CPU stand-in helper GPUs, half each
	pcie        float64
	pcieAuto    bool // the cache tunes the PCIe share
	adapt       int
	streamSlots int
	unbuffered  bool    // fill the RAM arena with unbuffered reads (else through the mapping)
	coldDirect  bool    // batches read their cold experts with unbuffered reads
	hostPinned  bool    // the device does not map the pinned experts (the CPU runs them all)
	helperRows  int     // tokens a helper's results come back for at once (0: a whole batch)
	lap         lapMode // the CPU stand-in device queues slot writes beside its kernels (ringlap_test.go)
	asyncMisses bool    // decode misses computed while the next layer is queued (latemisses_test.go)
	lateRefused bool    // with asyncMisses, the device refuses late rows
	// lateAddRefused: with asyncMisses, the device hands out late rows but refuses their add
	lateAddRefused bool
}

func tierCases() []tierCase {
	return append([]tierCase{
		{name: "no slots", vram: 0},
		{name: "some slots", vram: 0.4},
		{name: "all slots", vram: 1},
		{name: "some + pinned", vram: 0.3, pin: 0.3},
		{name: "some + pinned (unbuffered fill)", vram: 0.3, pin: 0.3, unbuffered: true},
		{name: "resident: all pinned", vram: 0, pin: 1, unbuffered: true},
		{name: "some + pinned + pcie", vram: 0.3, pin: 0.4, pcie: 0.5},
		{name: "all pinned over pcie", vram: 0, pin: 1, pcie: 1},
		{name: "some + pinned + pcie auto", vram: 0.3, pin: 0.4, pcieAuto: true},
		{name: "adaptive swaps", vram: 0.3, pin: 0.2, adapt: 2},
		{name: "streamed batches", vram: 0.25, pin: 0.25, streamSlots: 3},
		{name: "streamed, ring holds all", vram: 0.5, streamSlots: 64},
		{name: "streamed, cold read unbuffered", vram: 0.25, pin: 0.25, streamSlots: 3, coldDirect: true},
		{name: "helpers", vram: 0.3, helper: 0.4},
		{name: "helpers + pinned + adaptive swaps", vram: 0.2, pin: 0.2, helper: 0.3, adapt: 2},
		{name: "all on helpers, streamed batches", helper: 1, streamSlots: 3},
		{name: "helpers, results in rounds of 3 tokens", vram: 0.3, helper: 0.4, helperRows: 3},
		{name: "helpers, results one token at a time", vram: 0.2, pin: 0.2, helper: 0.3, helperRows: 1},
	}, append(lapCases(), lateCases()...)...)
}

// withHelpers moves the helper share of rank, after the VRAM and pinned experts, to the
// helper tier: the first half on helper 0, the rest on helper 1. It returns HelperOf.
func withHelpers(s experts.Shape, rank []experts.ID, tiers []experts.Tier, tc tierCase) []int8 {
	first := int(tc.vram*float64(s.Count())) + int(tc.pin*float64(s.Count()))
	nh := min(int(tc.helper*float64(s.Count())), s.Count()-first)
	if nh <= 0 {
		return nil
	}
	of := make([]int8, s.Count())
	for k, id := range rank[first : first+nh] {
		tiers[s.Index(id)] = experts.TierHelper
		if k >= nh/2 {
			of[s.Index(id)] = 1
		}
	}
	return of
}

// plan gives the first vram share of rank to VRAM, the next pin share to pinned slots.
func plan(s experts.Shape, rank []experts.ID, vram, pin float64) []experts.Tier {
	t := make([]experts.Tier, s.Count())
	nv := int(vram * float64(s.Count()))
	np := int(pin * float64(s.Count()))
	for i, id := range rank {
		switch {
		case i < nv:
			t[s.Index(id)] = experts.TierVRAM
		case i < nv+np:
			t[s.Index(id)] = experts.TierPinned
		default:
			t[s.Index(id)] = experts.TierCold
		}
	}
	return t
}

// neutralRank is expert 0 of every layer, then expert 1, ...
func neutralRank(s experts.Shape) []experts.ID {
	var r []experts.ID
	for e := range s.Experts {
		for l := range s.Layers {
			r = append(r, experts.ID{Layer: l, Expert: e})
		}
	}
	return r
}

// TestCacheMatchesTransformers: on the float reference path, every placement of the experts
// gives logits within the fixture's float_path max |Δlogit| of transformers at every position and the same
// greedy continuation.
func TestCacheMatchesTransformers(t *testing.T) {
	dir := fixtures.Path(t, "qwen3moe-tiny")
	ref := modeltest.LoadReference(t, dir)
	for name, v := range ref.Variants {
		f, h := openVariant(t, filepath.Join(dir, v.File))
		for _, tc := range tierCases() {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				hd := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 2, FloatPath: true})}
				host := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
				t.Cleanup(func() { hd.Close(); host.Close() })
				sh := experts.Shape{Layers: h.Layers, Experts: h.Experts}
				rank := neutralRank(sh)
				tiers := plan(sh, rank, tc.vram, tc.pin)
				helperOf := withHelpers(sh, rank, tiers, tc)
				arena := pinnedArena(t, f, sh, tiers, tc.unbuffered)
				dev, lap := deviceFor(t, hd, tc, arena)
				c, net := loadCached(t, f, dev, host, tc, sh, tiers, rank, arena, helperOf)
				for _, p := range v.Prompts {
					pl, gl, gen := modeltest.Greedy(t, net, p.Tokens, len(p.Generated), "f32", nil)
					dp := modeltest.MaxAbsDiff(pl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)))
					dg := modeltest.MaxAbsDiff(gl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File)))
					if lim := ref.Tolerances.FloatPath.MaxAbsLogit; dp > lim || dg > lim {
						t.Errorf("%s: logits differ by %.3g (prompt) / %.3g (decode), limit %g", p.Name, dp, dg, lim)
					}
					if !slices.Equal(gen, p.Generated) {
						t.Errorf("%s: greedy tokens %v, want %v", p.Name, gen, p.Generated)
					}
				}
				snap := c.Snapshot()
				st := snap.Stats
				var routed uint64
				for _, n := range st.Routed {
					routed += n
				}
				if routed == 0 {
					t.Fatal("no routed pairs counted")
				}
				nh := 0
				for _, tier := range tiers {
					if tier == experts.TierHelper {
						nh++
					}
				}
				if st.HelperSlots[0]+st.HelperSlots[1] != nh || (nh > 0 && (st.HelperSlots[0] == 0 || st.HelperSlots[1] == 0 || st.Routed[experts.TierHelper] == 0)) {
					t.Errorf("%d experts on helpers: %v slots, %d pairs routed to them", nh, st.HelperSlots, st.Routed[experts.TierHelper])
				}
				if tc.vram == 1 && st.Routed[experts.TierVRAM] != routed {
					t.Errorf("all experts in VRAM, but only %d of %d pairs hit it", st.Routed[experts.TierVRAM], routed)
				}
				if tc.pcie == 1 && st.PCIe == 0 {
					t.Error("pcie share 1, yet no miss went over PCIe")
				}
				if tc.pcieAuto && (st.PCIe == 0 || st.PCIeShare <= 0 || st.PCIeShare > 1) {
					t.Errorf("pcie auto: %d misses over PCIe, share now %g", st.PCIe, st.PCIeShare)
				}
				if tc.pcie == 0 && !tc.pcieAuto && st.PCIe != 0 {
					t.Errorf("pcie share 0, yet %d misses went over PCIe", st.PCIe)
				}
				if tc.adapt > 0 && st.Swaps == 0 {
					t.Error("adaptive swaps on, yet none happened")
				}
				if tc.adapt == 0 && st.Swaps != 0 {
					t.Errorf("adaptive swaps off, yet %d happened", st.Swaps)
				}
				if tc.streamSlots > 0 && tc.vram+tc.helper < 1 && st.Streamed == 0 { // helpers serve batches themselves
					t.Error("streaming on, yet no expert was streamed for a batch")
				}
				if tc.coldDirect && (st.ColdReads == 0 || st.ColdReadErrors != 0) {
					t.Errorf("unbuffered cold reads: %d done, %d failed", st.ColdReads, st.ColdReadErrors)
				}
				checkDecodeHost(t, st, v.Prompts, st.PCIeShare)
				checkLap(t, tc, lap, st)
				checkLate(t, tc, dev, st)
				t.Logf("routed %v, pcie %d, streamed %d (rounds overlapped %d), swaps %d", st.Routed, st.PCIe, st.Streamed, st.Overlapped, st.Swaps)
			})
		}
	}
}

// checkDecodeHost checks the decode-only host times against the prompts run: one decode step
// a generated token (and a one-token prompt), each time within the all-calls total, and CPU
// time in decode when a decode step had a miss the CPU computes (pcieShare 0: every pinned
// miss is the CPU's).
func checkDecodeHost(t *testing.T, st experts.CacheStats, prompts []fixtures.RefPrompt, pcieShare float64) {
	t.Helper()
	want := 0
	for _, p := range prompts {
		want += len(p.Generated)
		if len(p.Tokens) == 1 {
			want++
		}
	}
	if st.DecodeSteps != uint64(want) {
		t.Errorf("%d decode steps counted, the prompts ran %d", st.DecodeSteps, want)
	}
	for _, c := range []struct {
		name          string
		decode, total time.Duration
	}{{"waiting for routes", st.DecodeHost.WaitRoutes, st.WaitRoutes}, {"CPU misses", st.DecodeHost.CPUMisses, st.CPUMisses}, {"uploads", st.DecodeHost.Uploads, st.Uploads}} {
		if c.decode > c.total {
			t.Errorf("decode %s %v, more than the total %v", c.name, c.decode, c.total)
		}
	}
	if cpu := st.Decode[experts.TierCold] + st.Decode[experts.TierPinned]; pcieShare == 0 && cpu > 0 && (st.DecodeHost.CPUMisses <= 0 || st.DecodeHost.WaitRoutes <= 0) {
		t.Errorf("%d decode misses on the CPU, yet decode CPU time %v and wait %v", cpu, st.DecodeHost.CPUMisses, st.DecodeHost.WaitRoutes)
	}
}

// pinnedArena fills a RAM arena with the experts the plan pins (nil when none).
func pinnedArena(t *testing.T, f *gguf.File, sh experts.Shape, tiers []experts.Tier, unbuffered bool) *experts.Arena {
	t.Helper()
	var ids []experts.ID
	for i, tier := range tiers {
		if tier == experts.TierPinned {
			ids = append(ids, experts.ID{Layer: i / sh.Experts, Expert: i % sh.Experts})
		}
	}
	if len(ids) == 0 {
		return nil
	}
	l, err := experts.GGUFLayout(f)
	if err != nil {
		t.Fatal(err)
	}
	o := experts.DefaultFillOptions()
	o.Unbuffered = unbuffered
	a, _, err := experts.FillArena(t.Context(), l, ids, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// loadCached loads f through a cache of the tiers on dev and fills it.
// helperOf (nil: no helpers) places the helper tier on two CPU stand-in helper GPUs.
func loadCached(t *testing.T, f *gguf.File, dev experts.Device, host *cpu.Backend, tc tierCase, sh experts.Shape, tiers []experts.Tier, rank []experts.ID, arena *experts.Arena, helperOf []int8) (*experts.Cache, *model.Model) {
	t.Helper()
	cc := experts.CacheConfig{
		Shape: sh, Tier: tiers, Rank: rank,
		PCIeFrac: tc.pcie, PCIeAuto: tc.pcieAuto, AsyncMisses: tc.asyncMisses, AdaptEvery: tc.adapt, StreamSlots: tc.streamSlots, StreamMinTokens: 2,
		Pinned: arena, PinnedMapped: !tc.hostPinned,
	}
	if helperOf != nil {
		for range 2 {
			h := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 1, FloatPath: true})}
			t.Cleanup(func() { h.Close() })
			cc.Helpers = append(cc.Helpers, h)
		}
		cc.HelperOf, cc.HelperRows = helperOf, tc.helperRows
	}
	if tc.coldDirect {
		l, err := experts.GGUFLayout(f)
		if err != nil {
			t.Fatal(err)
		}
		first := slices.Index(tiers, experts.TierCold)
		r, why := experts.NewColdReader(l, experts.ID{Layer: first / sh.Experts, Expert: first % sh.Experts}, 2)
		if r == nil {
			t.Fatalf("no unbuffered reads of %s: %s", f.Path, why)
		}
		t.Cleanup(func() { r.Close() })
		cc.Cold = r
	}
	c, err := experts.NewCache(dev, host, cc)
	if err != nil {
		t.Fatal(err)
	}
	experts.EagerAdapt(c)
	net, err := model.LoadWith(f, dev, nil, c.Layer)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Fill(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return c, net
}

// openVariant opens a fixture model for the test's lifetime and reads its hyper-parameters.
func openVariant(t *testing.T, path string) (*gguf.File, model.Hparams) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h, err := model.ReadHparams(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, h
}
