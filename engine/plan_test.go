package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
	"strata/engine/synth"
	"strata/platform"
)

func TestPlanInput(t *testing.T) {
	// Qwen3-30B-A3B-like numbers.
	info := ModelInfo{Layers: 48, KVHeads: 4, HeadDim: 128, Experts: 128, ContextLength: 40960, NonExpertBytes: 1 << 30}
	s := experts.Shape{Layers: 48, Experts: 128, GateBytes: 1 << 20, UpBytes: 1 << 20, DownBytes: 1 << 20}
	rank := experts.NeutralRank(s)
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		check func(experts.PlanInput) string
	}{
		{"defaults", func(*Config) {}, func(in experts.PlanInput) string {
			if in.KVBytesPerToken != 2*48*4*128*2 || in.MinContext != 8192 || in.ModelContext != 40960 ||
				in.ExpertCache != experts.AutoSlots || in.VRAMReserveBytes != 1024<<20 || in.VRAMBudgetBytes != 0 ||
				in.HostReserveBytes != 8<<30 || in.HostBudgetBytes != 0 || in.Tiered || in.Resident ||
				in.GPUFreeBytes != 16<<30 || in.HostAvailBytes != 30<<30 || in.NonExpertBytes != 1<<30 ||
				in.ActivationBytes != 0 || len(in.Rank) != s.Count() { // planBatch adds the activations
				return "wrong defaults"
			}
			return ""
		}},
		{"max context is both the minimum and the most", func(c *Config) { c.MaxContext = 8192 }, func(in experts.PlanInput) string {
			if in.MinContext != 8192 || in.ModelContext != 8192 {
				return "max context not used"
			}
			return ""
		}},
		{"the float path keeps a float32 KV cache", func(c *Config) { c.FloatPath = true }, func(in experts.PlanInput) string {
			if in.KVBytesPerToken != 2*48*4*128*4 {
				return "float32 KV bytes"
			}
			return ""
		}},
		{"an int8 KV cache: a byte a value and a float32 scale per 32", func(c *Config) { c.KVType = "int8" }, func(in experts.PlanInput) string {
			if in.KVBytesPerToken != 2*48*4*(128+4*128/32) {
				return "int8 KV bytes"
			}
			return ""
		}},
		{"budgets", func(c *Config) {
			c.VRAMBudgetMiB, c.VRAMReserveMiB, c.ExpertCache = 12000, 256, 300
			c.TieredExperts, c.HostBudgetGiB, c.HostReserveGiB = true, 1.5, 4
		}, func(in experts.PlanInput) string {
			if in.VRAMBudgetBytes != 12000<<20 || in.VRAMReserveBytes != 256<<20 || in.ExpertCache != 300 ||
				!in.Tiered || in.HostBudgetBytes != 3<<29 || in.HostReserveBytes != 4<<30 {
				return "budgets not carried"
			}
			return ""
		}},
		{"--pcie-frac pins the experts outside VRAM", func(c *Config) { c.PCIeFrac = 0.5 }, func(in experts.PlanInput) string {
			if !in.Tiered || in.Resident {
				return "pcie-frac without a pinned tier"
			}
			return ""
		}},
		{"--host-budget-gib on a GPU pins the experts outside VRAM", func(c *Config) { c.HostBudgetGiB = 20 }, func(in experts.PlanInput) string {
			if !in.Tiered || in.Resident || in.HostBudgetBytes != 20<<30 {
				return "host budget without a pinned tier"
			}
			return ""
		}},
		{"--host-budget-gib beside --resident-experts leaves the arena to it", func(c *Config) { c.HostBudgetGiB, c.ResidentExperts = 20, true }, func(in experts.PlanInput) string {
			if in.Tiered || !in.Resident {
				return "resident and tiered at once"
			}
			return ""
		}},
		{"resident", func(c *Config) { c.ResidentExperts, c.ResidentBudgetGiB = true, 20 }, func(in experts.PlanInput) string {
			if !in.Resident || in.ResidentBudgetBytes != 20<<30 {
				return "resident not carried"
			}
			return ""
		}},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		in := planInput(info, s, 16<<30, 30<<30, cfg, rank)
		if msg := tc.check(in); msg != "" {
			in.Rank = nil // thousands of entries; the other fields say enough
			t.Errorf("%s: %s: %+v", tc.name, msg, in)
		}
	}

	// The whole chain on a 16 GiB card capped at 12000 MiB: the cache takes what the
	// weights, 8192 tokens of KV and the activations leave.
	cfg := DefaultConfig()
	cfg.VRAMBudgetMiB = 12000
	const act = 300 << 20
	in := planInput(info, s, 16<<30, 30<<30, cfg, rank)
	in.ActivationBytes = act
	p, err := experts.MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	kv := int64(8192 * 2 * 48 * 4 * 128 * 2)
	wantSlots := int((12000<<20 - 1<<30 - kv - act) / (3 << 20))
	if p.Slots != wantSlots || p.Context < 8192 {
		t.Fatalf("%d slots and %d tokens of context, want %d and at least 8192", p.Slots, p.Context, wantSlots)
	}
	// Budget too small for the weights and the minimal KV cache: the error names the fix.
	cfg.VRAMBudgetMiB = 1200
	if _, err := experts.MakePlan(planInput(info, s, 16<<30, 30<<30, cfg, rank)); err == nil || !strings.Contains(err.Error(), "--vram-budget-mib") {
		t.Fatalf("small budget: %v", err)
	}
}

// expertBytes is one expert's share of a stacked expert tensor, from reference.json's type
// and ne.
func expertBytes(t *testing.T, v fixtures.RefVariant, name string) int64 {
	t.Helper()
	rt, err := v.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	typ, err := quant.ParseType(rt.Type)
	if err != nil || len(rt.Ne) != 3 {
		t.Fatalf("%s: %s: type %q ne %v: %v", v.Name, name, rt.Type, rt.Ne, err)
	}
	row, err := quant.RowBytes(typ, rt.Ne[0])
	if err != nil {
		t.Fatal(err)
	}
	return int64(row) * int64(rt.Ne[1])
}

func TestExpertShape(t *testing.T) {
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	for _, v := range ref.All() {
		f, err := gguf.Open(ref.Path(v))
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
			t.Fatalf("%s: %v", v.File, err)
		}
		cfg := ref.Model(t, v).Config
		if s.Layers != cfg.Layers || s.Experts != cfg.ExpertCount() {
			t.Fatalf("%s: shape %+v, reference.json says %d layers x %d experts", v.File, s, cfg.Layers, cfg.ExpertCount())
		}
		// Each blob part is one expert's slice of the stacked tensor, as its type and ne say.
		want := [3]int64{expertBytes(t, v, "blk.0.ffn_gate_exps.weight"), expertBytes(t, v, "blk.0.ffn_up_exps.weight"), expertBytes(t, v, "blk.0.ffn_down_exps.weight")}
		if got := [3]int64{s.GateBytes, s.UpBytes, s.DownBytes}; got != want {
			t.Errorf("%s: gate/up/down bytes %v, want %v from reference.json", v.File, got, want)
		}
		// Every layer's experts have the same types here, so the blobs add up to the file's.
		if got := s.BlobBytes() * int64(s.Count()); got != info.ExpertBytes {
			t.Errorf("%s: %d experts x %d bytes = %d, the file has %d bytes of experts", v.File, s.Count(), s.BlobBytes(), got, info.ExpertBytes)
		}
		// A missing expert tensor is named.
		info.Layers++
		missing := fmt.Sprintf(`"blk.%d.ffn_gate_exps.weight" is missing`, info.Layers-1)
		if _, err := expertShape(f, info); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: missing tensor: %v", v.File, err)
		}
		info.Layers--
		info.Experts++
		if _, err := expertShape(f, info); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("not %d stacked experts", info.Experts)) {
			t.Errorf("%s: wrong expert count: %v", v.File, err)
		}
	}
}

func TestPlanForOnTheCPU(t *testing.T) {
	path := smallestVariant(t)
	cfg := DefaultConfig()
	cfg.Backend = "cpu"
	p, info, err := PlanFor(context.Background(), path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Slots != 0 || p.Counts()[experts.TierCPU] != info.Layers*info.Experts || p.Bytes[experts.TierCPU] != info.ExpertBytes {
		t.Fatalf("CPU plan: %d slots, tiers %v, bytes %v (model: %d experts, %d bytes)", p.Slots, p.Counts(), p.Bytes, info.Layers*info.Experts, info.ExpertBytes)
	}
	if p.NonExpertBytes != info.NonExpertBytes || p.Context <= 0 || p.Context > info.ContextLength {
		t.Fatalf("CPU plan: non-expert %d (want %d), context %d", p.NonExpertBytes, info.NonExpertBytes, p.Context)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "--backend cpu") {
		t.Errorf("notes %q do not say the CPU was asked for", p.Notes)
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"slots on the CPU", func(c *Config) { c.ExpertCache = 4 }, "no usable GPU"},
		{"helper GPUs", func(c *Config) { c.ExpertCacheDevice1 = 2 }, "helper GPUs"},
		{"bad config", func(c *Config) { c.TieredExperts, c.ResidentExperts = true, true }, "pick one"},
	} {
		c := cfg
		tc.edit(&c)
		if _, _, err := PlanFor(context.Background(), path, c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := PlanFor(context.Background(), path+".absent", cfg); err == nil {
		t.Error("a missing model file planned")
	}
}

// TestPlanForMachine plans every variant for a given GPU: a head size the GPU kernels take
// gets the card (all experts fit in its slots), another one is planned for the CPU and
// says why.
func TestPlanForMachine(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	for _, v := range ref.All() {
		path := ref.Path(v)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := describe(f)
		s, err := expertShape(f, info)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		headDim := ref.Model(t, v).Config.HeadDim
		cfg := DefaultConfig()
		p, _, err := PlanForMachine(context.Background(), path, cfg, Machine{GPUFreeBytes: 2000 << 20, HostAvailBytes: 16 << 30})
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		notes := strings.Join(p.Notes, "\n")
		if !gpu.HeadDimSupported(headDim) {
			if p.Slots != 0 || p.VRAMLimit != 0 || !strings.Contains(notes, fmt.Sprintf("head size of %d", headDim)) {
				t.Errorf("%s (head size %d): %d slots, limit %d, notes %q; want a CPU plan that names the head size", v.File, headDim, p.Slots, p.VRAMLimit, notes)
			}
			continue
		}
		// The activations of the default prefill batch, plus Open's streaming ring of one
		// layer's experts.
		f, err = gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		h, err := model.ReadHparams(f)
		if err != nil {
			t.Fatal(err)
		}
		act := activationBytesFor(f, h, defaultPrefill)
		var embd int64 // the token embeddings a GPU start keeps in pinned host memory
		if ti, ok := f.Tensor("token_embd.weight"); ok {
			if _, out := f.Tensor("output.weight"); out {
				embd = ti.Size
			}
		}
		f.Close()
		if p.HostWeightBytes != embd || p.VRAMWeightBytes() != p.NonExpertBytes-embd {
			t.Errorf("%s: %d of %d non-expert bytes planned in host memory, want the token embeddings' %d", v.File, p.HostWeightBytes, p.NonExpertBytes, embd)
		}
		// A start that fits the card whole keeps them in VRAM; --tiered-experts tiers it.
		roomy := Machine{GPUFreeBytes: 1024<<20 + info.FileBytes + 1<<30, HostAvailBytes: 16 << 30}
		tiered := cfg
		tiered.TieredExperts = true
		pw, _, errW := PlanForMachine(context.Background(), path, cfg, roomy)
		pt, _, errT := PlanForMachine(context.Background(), path, tiered, roomy)
		if errW != nil || errT != nil || pw.HostWeightBytes != 0 || pt.HostWeightBytes != embd {
			t.Errorf("%s: a card the model fits whole: %v, %v; %d non-expert bytes planned in host memory (want 0), %d with --tiered-experts (want %d)", v.File, errW, errT, pw.HostWeightBytes, pt.HostWeightBytes, embd)
		}
		// Under a pinned cap the embeddings may not fit it: the plan counts them in VRAM.
		capped := cfg
		capped.PinnedBudgetMiB = 4096
		if pc, _, err := PlanForMachine(context.Background(), path, capped, Machine{GPUFreeBytes: 2000 << 20, HostAvailBytes: 16 << 30}); err != nil || pc.HostWeightBytes != 0 {
			t.Errorf("%s: --pinned-budget-mib 4096: %v, %d non-expert bytes planned in host memory, want 0", v.File, err, pc.HostWeightBytes)
		}
		if p.Batch != defaultPrefill || p.ActivationBytes != act+int64(info.Experts)*s.BlobBytes() {
			t.Errorf("%s: activations %d for batches of %d, want %d + %d ring slots of %d for %d", v.File, p.ActivationBytes, p.Batch, act, info.Experts, s.BlobBytes(), defaultPrefill)
		}
		if p.VRAMLimit != (2000-1024)<<20 || p.Slots != s.Count() || !strings.Contains(notes, "2000 MiB free (given, not probed)") {
			t.Errorf("%s: limit %d, %d slots, notes %q", v.File, p.VRAMLimit, p.Slots, p.Notes)
		}
		// --backend cpu wins over a given GPU.
		cfg.Backend = "cpu"
		p, _, err = PlanForMachine(context.Background(), path, cfg, Machine{GPUFreeBytes: 2000 << 20})
		if err != nil || p.Slots != 0 || p.VRAMLimit != 0 || p.Counts()[experts.TierCPU] != s.Count() || p.HostWeightBytes != 0 {
			t.Errorf("%s: --backend cpu with a given GPU: %v, %d slots, limit %d, %d non-expert bytes in host memory", v.File, err, p.Slots, p.VRAMLimit, p.HostWeightBytes)
		}
	}
}

// smallestVariant is the path of the smallest qwen3moe-tiny file, for tests that need any
// model with the fixtures' dummy vocabulary.
func smallestVariant(t *testing.T) string {
	t.Helper()
	return fixtures.LoadReference(t, "qwen3moe-tiny").Smallest()
}

// copyModel puts the smallest fixture model in a temporary folder, so its profile can be saved next to
// it.
func copyModel(t *testing.T) string {
	t.Helper()
	path := smallestVariant(t)
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func openCPU(t *testing.T, path string) *Model {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 2, 256
	m, err := Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkProfileSums checks that every layer routed tokens*ExpertsUsed times.
func checkProfileSums(t *testing.T, p *experts.Profile, used int, tokens uint64) {
	t.Helper()
	if p.Tokens != tokens {
		t.Fatalf("profile of %d tokens, want %d", p.Tokens, tokens)
	}
	for l := range p.Layers {
		var n uint64
		var w float64
		for e := range p.Experts {
			n += p.Count[l*p.Experts+e]
			w += p.Weight[l*p.Experts+e]
		}
		if n != tokens*uint64(used) {
			t.Errorf("layer %d routed %d times, want %d tokens x %d", l, n, tokens, used)
		}
		// The router weights of each token are renormalised to 1.
		if d := w - float64(tokens); d > 1e-3*float64(tokens) || d < -1e-3*float64(tokens) {
			t.Errorf("layer %d weights sum to %g, want %d", l, w, tokens)
		}
	}
}

func TestLearnedProfileIsSavedAndAdded(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := copyModel(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := describe(f)
	shape, err := expertShape(f, info)
	if err != nil {
		t.Fatal(err)
	}
	if p, at := loadProfile(f, shape); p != nil || at != "" {
		t.Fatalf("a profile before any run: %s", at)
	}

	m := openCPU(t, path)
	if err := m.saveLearnedProfile(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".strata-profile"); !os.IsNotExist(err) {
		t.Fatalf("a run that routed nothing saved a profile (%v)", err)
	}
	res, err := m.NewSession(SessionOptions{}).Generate(context.Background(), []int{1, 2, 3, 4, 5}, Sampling{MaxTokens: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 5 prompt tokens, then one forward pass for each generated token but the last.
	first := uint64(5 + len(res.Tokens) - 1)
	checkProfileSums(t, m.RoutingProfile(), info.ExpertsUsed, first)
	if err := m.saveLearnedProfile(); err != nil {
		t.Fatal(err)
	}
	p, at := loadProfile(f, shape)
	if p == nil || at != path+".strata-profile" {
		t.Fatalf("saved profile not found next to the model (%q)", at)
	}
	checkProfileSums(t, p, info.ExpertsUsed, first)

	// A second run adds to it.
	m2 := openCPU(t, path)
	if _, err := m2.NewSession(SessionOptions{}).Generate(context.Background(), []int{7, 8, 9}, Sampling{MaxTokens: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m2.saveLearnedProfile(); err != nil {
		t.Fatal(err)
	}
	p2, _ := loadProfile(f, shape)
	if p2 == nil {
		t.Fatal("profile gone after the second save")
	}
	checkProfileSums(t, p2, info.ExpertsUsed, first+3)
	if p2.Key != experts.ModelKey(f) {
		t.Errorf("profile key %q, model key %q", p2.Key, experts.ModelKey(f))
	}
	f.Close()

	// PlanFor orders the experts by it.
	cfg := DefaultConfig()
	cfg.Backend = "cpu"
	plan, _, err := PlanFor(context.Background(), path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := p2.Rank(); plan.Rank[0] != want[0] || plan.Rank[len(want)-1] != want[len(want)-1] {
		t.Errorf("plan rank starts %v, the profile's %v", plan.Rank[:3], want[:3])
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "from the profile") {
		t.Errorf("notes %q do not name the profile", plan.Notes)
	}
}

// synthModel writes the synthetic tiny model: unlike the fixtures' dummy vocabulary, its
// byte-level tokenizer encodes any text, so prompts become tokens.
func synthModel(t *testing.T) string {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant = quant.Q8_0
	path := filepath.Join(t.TempDir(), "synth.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestProfileModel(t *testing.T) {
	m := openCPU(t, synthModel(t))
	// Routes before the profile run must not be counted in it.
	if _, err := m.NewSession(SessionOptions{}).Generate(context.Background(), []int{1, 2, 3}, Sampling{MaxTokens: 1}, nil); err != nil {
		t.Fatal(err)
	}
	prompts := []string{"Hello, how are you?", "Wie geht es dir?", strings.Repeat("long prompt ", 100)}
	var want uint64
	for _, p := range prompts {
		ids, err := m.text.chatTokens([]Message{{Role: RoleUser, Content: p}}, nil, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) < 10 {
			t.Fatalf("prompt %q is %d tokens", p, len(ids))
		}
		// The long one is cut to the context, less the position the sampled token needs.
		want += uint64(min(len(ids), m.cfg.MaxContext-1))
	}
	var calls []int
	p, err := ProfileModel(context.Background(), m, prompts, func(done, total int) {
		if total != len(prompts) {
			t.Errorf("progress total %d", total)
		}
		calls = append(calls, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 3 || calls[2] != 3 {
		t.Errorf("progress calls %v", calls)
	}
	checkProfileSums(t, p, m.info.ExpertsUsed, want)
	if p.Key != experts.ModelKey(m.file) {
		t.Errorf("profile key %q, model key %q", p.Key, experts.ModelKey(m.file))
	}

	if _, err := ProfileModel(context.Background(), m, nil, nil); err == nil {
		t.Error("no prompts: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ProfileModel(ctx, m, prompts, nil); err == nil {
		t.Error("cancelled: no error")
	}
	// The fixtures' dummy vocabulary encodes no text: a clear error, not an empty profile.
	dummy := openCPU(t, smallestVariant(t))
	if _, err := ProfileModel(context.Background(), dummy, prompts, nil); err == nil || !strings.Contains(err.Error(), "gave no tokens") {
		t.Errorf("dummy tokenizer: %v", err)
	}
}

// TestPlanPlacesHelpers: the experts ranked after the main GPU's slots go to helper 1, then
// helper 2, and the plan counts their bytes; a helper without the room fails by its flag.
func TestPlanPlacesHelpers(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := synthModel(t)
	cfg := DefaultConfig()
	cfg.ExpertCache, cfg.ExpertCacheDevice1, cfg.ExpertCacheDevice2 = 4, 3, 2
	mc := Machine{GPUFreeBytes: 4 << 30, HostAvailBytes: 16 << 30, HelperFreeBytes: [2]int64{1 << 30, 1 << 30}}
	p, _, err := PlanForMachine(context.Background(), path, cfg, mc)
	if err != nil {
		t.Fatal(err)
	}
	blob := p.Shape.BlobBytes()
	if p.Slots != 4 || p.HelperSlots != [2]int{3, 2} || p.Counts()[experts.TierHelper] != 5 || p.Bytes[experts.TierHelper] != 5*blob {
		t.Fatalf("slots %d, helper slots %v, tiers %v, helper bytes %d (one expert %d)", p.Slots, p.HelperSlots, p.Counts(), p.Bytes[experts.TierHelper], blob)
	}
	for i, id := range p.Rank {
		want := experts.TierCold
		switch {
		case i < 4:
			want = experts.TierVRAM
		case i < 9:
			want = experts.TierHelper
		}
		if got := p.Tier[p.Shape.Index(id)]; got != want {
			t.Errorf("rank %d (%v): %s, want %s", i, id, got, want)
		}
	}
	if s := p.Summary(); !strings.Contains(s, "helper GPU 1: 3 slots") || !strings.Contains(s, "helper GPU 2: 2 slots") {
		t.Errorf("summary does not show the helpers:\n%s", s)
	}

	mc.HelperFreeBytes[1] = 512<<20 + blob
	if _, _, err := PlanForMachine(context.Background(), path, cfg, mc); !errors.Is(err, ErrBudgetTooSmall) || !strings.Contains(err.Error(), "--expert-cache-device2 2") {
		t.Errorf("helper 2 with room for one slot: %v", err)
	}
	// Refused by the helper flags: on the CPU (no GPU to help), or on a machine with one GPU
	// (no helper GPU 1).
	var ce *ConfigError
	if _, err := Open(context.Background(), path, cfg, nil); !errors.As(err, &ce) || !strings.HasPrefix(ce.Flag, "expert-cache-device") {
		t.Errorf("Open with helper slots: %v, want a refusal by the helper flags", err)
	}
}

// TestChooseGPUs: auto takes the card with the most free VRAM, an index takes that card,
// the helpers follow by free VRAM, and a missing index is refused by its flag.
func TestChooseGPUs(t *testing.T) {
	devs := []platform.GPU{{Index: 0, VRAMFreeBytes: 6 << 30}, {Index: 1, VRAMFreeBytes: 22 << 30}, {Index: 2, VRAMFreeBytes: 10 << 30}}
	order := func(gs []platform.GPU) []int {
		var out []int
		for _, g := range gs {
			out = append(out, g.Index)
		}
		return out
	}
	for _, tc := range []struct {
		main, want int
		helpers    []int
	}{
		{Auto, 1, []int{2, 0}},
		{0, 0, []int{1, 2}},
		{2, 2, []int{1, 0}},
	} {
		m, h, err := chooseGPUs(devs, tc.main)
		if err != nil || m.Index != tc.want || !slices.Equal(order(h), tc.helpers) {
			t.Errorf("main %d: got GPU %d with helpers %v (%v), want %d with %v", tc.main, m.Index, order(h), err, tc.want, tc.helpers)
		}
	}
	var ce *ConfigError
	if _, _, err := chooseGPUs(devs, 3); !errors.As(err, &ce) || ce.Flag != "main-gpu" {
		t.Errorf("main 3 of 3 GPUs: %v", err)
	}
}
