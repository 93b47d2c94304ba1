package engine

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/quant"
	"strata/engine/synth"
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
				in.ActivationBytes != activationBytes || len(in.Rank) != s.Count() {
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
	p, err := experts.MakePlan(planInput(info, s, 16<<30, 30<<30, cfg, rank))
	if err != nil {
		t.Fatal(err)
	}
	kv := int64(8192 * 2 * 48 * 4 * 128 * 2)
	wantSlots := int((12000<<20 - 1<<30 - kv - activationBytes) / (3 << 20))
	if p.Slots != wantSlots || p.Context < 8192 {
		t.Fatalf("%d slots and %d tokens of context, want %d and at least 8192", p.Slots, p.Context, wantSlots)
	}
	// Budget too small for the weights and the minimal KV cache: the error names the fix.
	cfg.VRAMBudgetMiB = 1200
	if _, err := experts.MakePlan(planInput(info, s, 16<<30, 30<<30, cfg, rank)); err == nil || !strings.Contains(err.Error(), "--vram-budget-mib") {
		t.Fatalf("small budget: %v", err)
	}
}

func TestExpertShape(t *testing.T) {
	for _, file := range []string{"model-f32.gguf", "model-q8_0.gguf", "model-q4_k.gguf"} {
		f, err := gguf.Open(fixtures.Path(t, "qwen3moe-tiny", file))
		if err != nil {
			t.Fatal(err)
		}
		info, err := describe(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := expertShape(f, info)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if s.Layers != info.Layers || s.Experts != info.Experts || s.GateBytes <= 0 || s.UpBytes <= 0 || s.DownBytes <= 0 {
			t.Fatalf("%s: shape %+v", file, s)
		}
		// Every layer's experts have the same types here, so the blobs add up to the file's.
		if got := s.BlobBytes() * int64(s.Count()); got != info.ExpertBytes {
			t.Errorf("%s: %d experts x %d bytes = %d, the file has %d bytes of experts", file, s.Count(), s.BlobBytes(), got, info.ExpertBytes)
		}
	}
	// The q4_k model stores down in Q6_K: wider than gate and up.
	f, err := gguf.Open(fixtures.Path(t, "qwen3moe-tiny", "model-q4_k.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := describe(f)
	s, _ := expertShape(f, info)
	if s.GateBytes != 256*256/256*144 || s.DownBytes != 256*256/256*210 {
		t.Errorf("q4_k shape %+v, want gate 9216 (Q4_K) and down 13440 (Q6_K)", s)
	}
	// A missing expert tensor is named.
	info.Layers++
	if _, err := expertShape(f, info); err == nil || !strings.Contains(err.Error(), `"blk.2.ffn_gate_exps.weight" is missing`) {
		t.Errorf("missing tensor: %v", err)
	}
	info.Layers--
	info.Experts = 4
	if _, err := expertShape(f, info); err == nil || !strings.Contains(err.Error(), "not 4 stacked experts") {
		t.Errorf("wrong expert count: %v", err)
	}
}

func TestPlanForOnTheCPU(t *testing.T) {
	path := fixtures.Path(t, "qwen3moe-tiny", "model-q8_0.gguf")
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

func TestPlanForMachine(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := fixtures.Path(t, "qwen3moe-tiny", "model-q4_k.gguf") // head size 64: GPU kernels exist
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
	cfg := DefaultConfig()
	p, _, err := PlanForMachine(context.Background(), path, cfg, Machine{GPUFreeBytes: 2000 << 20, HostAvailBytes: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	// Open's tiered placement adds a streaming ring of one layer's experts to the activations.
	if p.ActivationBytes != activationBytes+int64(info.Experts)*s.BlobBytes() {
		t.Errorf("activations %d, want %d + %d ring slots of %d", p.ActivationBytes, activationBytes, info.Experts, s.BlobBytes())
	}
	if p.VRAMLimit != (2000-1024)<<20 || p.Slots != s.Count() || !strings.Contains(strings.Join(p.Notes, "\n"), "2000 MiB free (given, not probed)") {
		t.Errorf("limit %d, %d slots, notes %q", p.VRAMLimit, p.Slots, p.Notes)
	}
	// --backend cpu wins over a given GPU.
	cfg.Backend = "cpu"
	p, _, err = PlanForMachine(context.Background(), path, cfg, Machine{GPUFreeBytes: 2000 << 20})
	if err != nil || p.Slots != 0 || p.VRAMLimit != 0 || p.Counts()[experts.TierCPU] != s.Count() {
		t.Errorf("--backend cpu with a given GPU: %v, %d slots, limit %d", err, p.Slots, p.VRAMLimit)
	}
}

// copyModel puts a fixture model in a temporary folder, so its profile can be saved next to
// it.
func copyModel(t *testing.T, name string) string {
	t.Helper()
	src, err := os.Open(fixtures.Path(t, "qwen3moe-tiny", name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), name)
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
	path := copyModel(t, "model-q8_0.gguf")
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
		ids, err := m.text.chatTokens([]Message{{Role: RoleUser, Content: p}}, nil, true)
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
	dummy := openCPU(t, fixtures.Path(t, "qwen3moe-tiny", "model-q8_0.gguf"))
	if _, err := ProfileModel(context.Background(), dummy, prompts, nil); err == nil || !strings.Contains(err.Error(), "gave no tokens") {
		t.Errorf("dummy tokenizer: %v", err)
	}
}
