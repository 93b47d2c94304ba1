package experts

import (
	"strings"
	"testing"
)

// planShape: 2 layers x 4 experts of 1 MiB each.
var planShape = Shape{Layers: 2, Experts: 4, GateBytes: 256 << 10, UpBytes: 256 << 10, DownBytes: 512 << 10}

// planRank is a profile order that is not the neutral one.
var planRank = []ID{{1, 3}, {0, 0}, {1, 0}, {0, 2}, {0, 1}, {1, 1}, {0, 3}, {1, 2}}

// basePlanInput needs 112 MiB of VRAM before any expert: 100 MiB of weights, 2 MiB of KV for
// 2048 tokens, 10 MiB of activations.
func basePlanInput() PlanInput {
	return PlanInput{
		Shape: planShape, NonExpertBytes: 100 << 20, KVBytesPerToken: 1 << 10,
		MinContext: 2048, ModelContext: 4096, ActivationBytes: 10 << 20,
		GPUFreeBytes: 1 << 30, ExpertCache: AutoSlots,
		HostAvailBytes: 64 << 30, HostReserveBytes: 8 << 30,
		Rank: planRank,
	}
}

// tierLetters writes the plan's tiers in rank order, one letter each (V, H, P, C, U=cpu).
func tierLetters(p Plan) string {
	var b strings.Builder
	for _, id := range p.Rank {
		b.WriteByte("VHPCU"[p.Tier[p.Shape.Index(id)]])
	}
	return b.String()
}

func TestMakePlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*PlanInput)
		tiers   string // in rank order
		slots   int
		context int
		note    string // a piece of one note, if any
	}{
		{"no GPU", func(in *PlanInput) { in.GPUFreeBytes = 0 }, "UUUUUUUU", 0, 4096, "no usable GPU"},
		{"no GPU, small RAM caps the context", func(in *PlanInput) { in.GPUFreeBytes, in.HostAvailBytes = 0, 4<<20 }, "UUUUUUUU", 0, 1024, ""},
		{"no GPU, tiered changes nothing", func(in *PlanInput) { in.GPUFreeBytes, in.Tiered = 0, true }, "UUUUUUUU", 0, 4096, "without a GPU it changes nothing"},
		{"no GPU, resident pins every expert", func(in *PlanInput) { in.GPUFreeBytes, in.Resident = 0, true }, "PPPPPPPP", 0, 4096, "page-locked RAM arena"},
		{"no GPU, resident within its budget", func(in *PlanInput) { in.GPUFreeBytes, in.Resident, in.ResidentBudgetBytes = 0, true, 5<<20 }, "PPPPPCCC", 0, 4096, "caps the RAM arena"},
		{"no GPU, RAM below the minimum KV", func(in *PlanInput) { in.GPUFreeBytes, in.HostAvailBytes = 0, 4<<20+4<<10 }, "UUUUUUUU", 0, 1025, "a KV cache of 2048 tokens needs 2.0 MiB"},
		{"no GPU, host budget unused", func(in *PlanInput) { in.GPUFreeBytes, in.HostBudgetBytes = 0, 20<<30 }, "UUUUUUUU", 0, 4096, "without a GPU it is unused"},
		{"no GPU, resident budget without resident", func(in *PlanInput) { in.GPUFreeBytes, in.ResidentBudgetBytes = 0, 1<<30 }, "UUUUUUUU", 0, 4096, "--resident-budget-gib caps the arena"},
		{"no GPU, zero slots asked", func(in *PlanInput) { in.GPUFreeBytes, in.ExpertCache = 0, 0 }, "UUUUUUUU", 0, 4096, ""},
		{"auto, all fit", func(*PlanInput) {}, "VVVVVVVV", 8, 4096, "every expert fits"},
		{"auto, budget caps", func(in *PlanInput) { in.VRAMBudgetBytes = 115 << 20 }, "VVVCCCCC", 3, 2048, "caps the expert cache at 3 of 8"},
		{"auto, reserve caps", func(in *PlanInput) { in.GPUFreeBytes, in.VRAMReserveBytes = 300<<20, 185<<20 }, "VVVCCCCC", 3, 2048, ""},
		{"auto, rest of VRAM to KV", func(in *PlanInput) { in.VRAMBudgetBytes = 115<<20 + 700<<10 }, "VVVCCCCC", 3, 2748, ""},
		{"auto, nothing fits but the minimum", func(in *PlanInput) { in.VRAMBudgetBytes = 112 << 20 }, "CCCCCCCC", 0, 2048, ""},
		{"explicit slots leave KV room", func(in *PlanInput) { in.VRAMBudgetBytes, in.ExpertCache = 115<<20, 2 }, "VVCCCCCC", 2, 3072, ""},
		{"zero slots", func(in *PlanInput) { in.ExpertCache = 0 }, "CCCCCCCC", 0, 4096, ""},
		{"more slots than experts", func(in *PlanInput) { in.ExpertCache = 20 }, "VVVVVVVV", 8, 4096, "more than the model's 8 experts"},
		{"neutral rank", func(in *PlanInput) { in.Rank, in.ExpertCache = nil, 2 }, "VVCCCCCC", 2, 4096, ""},
		{"tiered, auto host budget", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Tiered, in.HostAvailBytes, in.HostReserveBytes = 115<<20, true, 10<<20, 7<<20
		}, "VVVPPPCC", 3, 2048, "capped by the host budget"},
		{"tiered, host budget", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Tiered, in.HostBudgetBytes = 115<<20, true, 2<<20+1
		}, "VVVPPCCC", 3, 2048, "2 experts pinned, 3 cold"},
		{"tiered, everything pinned", func(in *PlanInput) { in.VRAMBudgetBytes, in.Tiered = 115<<20, true }, "VVVPPPPP", 3, 2048, ""},
		{"tiered, budget above available RAM", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Tiered, in.HostBudgetBytes, in.HostAvailBytes, in.HostReserveBytes = 115<<20, true, 1<<30, 3<<20, 1<<20
		}, "VVVPPPPP", 3, 2048, "only 2.0 MiB of RAM are available"},
		{"tiered, no RAM beyond the reserve", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Tiered, in.HostAvailBytes, in.HostReserveBytes = 115<<20, true, 1<<20, 2<<20
		}, "VVVCCCCC", 3, 2048, "0 experts pinned, 5 cold"},
		{"resident, no cap", func(in *PlanInput) { in.VRAMBudgetBytes, in.Resident = 115<<20, true }, "VVVPPPPP", 3, 2048, ""},
		{"resident, capped", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Resident, in.ResidentBudgetBytes = 115<<20, true, 2<<20
		}, "VVVPPCCC", 3, 2048, "2 experts resident, 3 cold"},
		{"resident larger than RAM", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Resident, in.HostAvailBytes, in.HostReserveBytes = 115<<20, true, 4<<20, 1<<20
		}, "VVVPPPCC", 3, 2048, "capped at the 3.0 MiB of RAM available beyond the --host-reserve-gib"},
		{"host budget without tiered", func(in *PlanInput) { in.VRAMBudgetBytes, in.HostBudgetBytes = 115<<20, 1<<30 }, "VVVCCCCC", 3, 2048, "without it the budget is unused"},
		{"resident budget without resident", func(in *PlanInput) { in.ResidentBudgetBytes = 1 << 30 }, "VVVVVVVV", 8, 4096, "without it the budget is unused"},
		{"model context below the minimum", func(in *PlanInput) { in.ModelContext, in.VRAMBudgetBytes = 1024, 113<<20 }, "VVCCCCCC", 2, 1024, ""},
		{"helpers take the next by rank", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.Tiered, in.HelperSlots, in.HelperFreeBytes = 115<<20, true, [2]int{2, 1}, [2]int64{600 << 20, 600 << 20}
		}, "VVVHHHPP", 3, 2048, ""},
		{"helper 2 alone", func(in *PlanInput) {
			in.VRAMBudgetBytes, in.HelperSlots, in.HelperFreeBytes = 115<<20, [2]int{0, 2}, [2]int64{0, 600 << 20}
		}, "VVVHHCCC", 3, 2048, ""},
		{"helper VRAM not known", func(in *PlanInput) { in.VRAMBudgetBytes, in.HelperSlots = 115<<20, [2]int{1, 0} }, "VVVHCCCC", 3, 2048, "helper GPU 1's free VRAM is not known"},
		{"helpers ask for more than is left", func(in *PlanInput) { in.VRAMBudgetBytes, in.HelperSlots = 115<<20, [2]int{4, 3} }, "VVVHHHHH", 3, 2048, "helper GPU 2 gets 1 slots"},
		{"weights in host memory leave VRAM to slots", func(in *PlanInput) { in.VRAMBudgetBytes, in.HostWeightBytes = 115<<20, 2<<20 }, "VVVVVCCC", 5, 2048, ""},
		{"weights in host memory: no GPU", func(in *PlanInput) { in.GPUFreeBytes, in.HostWeightBytes = 0, 2<<20 }, "UUUUUUUU", 0, 4096, ""},
	} {
		in := basePlanInput()
		tc.edit(&in)
		p, err := MakePlan(in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := tierLetters(p); got != tc.tiers {
			t.Errorf("%s: tiers %s, want %s", tc.name, got, tc.tiers)
		}
		helpers := 0
		for _, n := range p.HelperSlots {
			helpers += n
		}
		if of := p.HelperOf(); helpers > 0 {
			var per [2]int
			for i, t := range p.Tier {
				if t == TierHelper {
					per[of[i]]++
				}
			}
			if per != p.HelperSlots {
				t.Errorf("%s: HelperOf puts %v experts on the helpers, the plan %v", tc.name, per, p.HelperSlots)
			}
		} else if of != nil {
			t.Errorf("%s: HelperOf without helper slots", tc.name)
		}
		if helpers != p.Counts()[TierHelper] || (helpers > 0) != strings.Contains(p.Summary(), "helper GPU") {
			t.Errorf("%s: helper slots %v for %d helper-tier experts", tc.name, p.HelperSlots, p.Counts()[TierHelper])
		}
		if p.Slots != tc.slots || p.Context != tc.context {
			t.Errorf("%s: %d slots and %d tokens of context, want %d and %d", tc.name, p.Slots, p.Context, tc.slots, tc.context)
		}
		if p.KVBytes != int64(p.Context)*in.KVBytesPerToken {
			t.Errorf("%s: KV bytes %d for %d tokens", tc.name, p.KVBytes, p.Context)
		}
		var sum int64
		for tier, b := range p.Bytes {
			if want := int64(p.Counts()[tier]) * planShape.BlobBytes(); b != want {
				t.Errorf("%s: %s tier holds %d bytes, want %d", tc.name, tier, b, want)
			}
			sum += b
		}
		if sum != int64(planShape.Count())*planShape.BlobBytes() {
			t.Errorf("%s: tiers hold %d bytes in all", tc.name, sum)
		}
		if p.VRAMLimit > 0 && p.VRAMUsed() > p.VRAMLimit {
			t.Errorf("%s: the plan uses %d bytes of VRAM, over its limit %d", tc.name, p.VRAMUsed(), p.VRAMLimit)
		}
		if want := in.HostWeightBytes * min(in.GPUFreeBytes, 1); p.HostWeightBytes != want || p.VRAMWeightBytes() != in.NonExpertBytes-want ||
			(want > 0) != strings.Contains(p.Summary(), "in pinned RAM, not VRAM") {
			t.Errorf("%s: %d of %d non-expert bytes in host memory (%d in VRAM), want %d", tc.name, p.HostWeightBytes, p.NonExpertBytes, p.VRAMWeightBytes(), want)
		}
		if tc.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tc.note) {
			t.Errorf("%s: notes %q do not say %q", tc.name, p.Notes, tc.note)
		}
		if s := p.Summary(); !strings.Contains(s, "tier") || (tc.note != "" && !strings.Contains(s, tc.note)) {
			t.Errorf("%s: summary lacks the table or the note:\n%s", tc.name, s)
		}
	}
}

func TestMakePlanErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*PlanInput)
		want []string
	}{
		{"slots without GPU", func(in *PlanInput) { in.GPUFreeBytes, in.ExpertCache = 0, 3 }, []string{"--expert-cache 3", "no usable GPU"}},
		{"budget below the minimum", func(in *PlanInput) { in.VRAMBudgetBytes = 111 << 20 },
			[]string{"111 MiB for Strata", "--vram-budget-mib 111 cap", "needs 112 MiB", "100 MiB of non-expert weights", "2 MiB of KV cache for 2048 tokens", "10 MiB of activations", "raise --vram-budget-mib", "lower --vram-reserve-mib", "--backend cpu"}},
		{"reserve leaves too little", func(in *PlanInput) { in.GPUFreeBytes, in.VRAMReserveBytes = 200<<20, 100<<20 },
			[]string{"100 MiB for Strata", "200 MiB free less the --vram-reserve-mib 100", "needs 112 MiB"}},
		{"reserve above free", func(in *PlanInput) { in.GPUFreeBytes, in.VRAMReserveBytes = 200<<20, 300<<20 }, []string{"0 MiB for Strata"}},
		{"slots do not fit", func(in *PlanInput) { in.VRAMBudgetBytes, in.ExpertCache = 115<<20, 4 },
			[]string{"--expert-cache 4", "at most 3 slots fit", "3 MiB left", "lower --expert-cache"}},
		{"more slots than experts do not fit", func(in *PlanInput) { in.VRAMBudgetBytes, in.ExpertCache = 115<<20, 20 }, []string{"--expert-cache 20", "at most 3 slots fit"}},
		{"tiered and resident", func(in *PlanInput) { in.Tiered, in.Resident = true, true }, []string{"pick one"}},
		{"helper slots without GPU", func(in *PlanInput) { in.GPUFreeBytes, in.HelperSlots = 0, [2]int{1, 0} }, []string{"--expert-cache-device1/2", "no usable main GPU"}},
		{"helper slots do not fit", func(in *PlanInput) { in.HelperSlots, in.HelperFreeBytes = [2]int{0, 90}, [2]int64{0, 514 << 20} },
			[]string{"--expert-cache-device2 90", "helper GPU 2 has 514 MiB free", "at most 2 slots", "lower --expert-cache-device2"}},
		{"negative numbers", func(in *PlanInput) { in.HostReserveBytes, in.NonExpertBytes = -1, -2 }, []string{"--host-reserve-gib is negative", "non-expert bytes is negative"}},
		{"bad slot count", func(in *PlanInput) { in.ExpertCache = -2 }, []string{"--expert-cache -2"}},
		{"more weights in host memory than in all", func(in *PlanInput) { in.HostWeightBytes = in.NonExpertBytes + 1 }, []string{"104857601 non-expert bytes in host memory of 104857600"}},
		{"negative weights in host memory", func(in *PlanInput) { in.HostWeightBytes = -1 }, []string{"non-expert bytes in host memory is negative"}},
		{"budget below the minimum, weights in host memory", func(in *PlanInput) { in.VRAMBudgetBytes, in.HostWeightBytes = 109<<20, 2<<20 },
			[]string{"109 MiB for Strata", "needs 110 MiB", "98 MiB of non-expert weights"}},
		{"no experts", func(in *PlanInput) { in.Shape.Experts, in.Rank = 0, nil }, []string{"2 layers x 0 experts"}},
		{"empty expert", func(in *PlanInput) { in.Shape.GateBytes, in.Shape.UpBytes, in.Shape.DownBytes = 0, 0, 0 }, []string{"expert of 0+0+0 bytes"}},
		{"short rank", func(in *PlanInput) { in.Rank = planRank[:7] }, []string{"lists 7 experts, the model has 8"}},
		{"rank twice", func(in *PlanInput) { in.Rank = append(append([]ID{}, planRank[:7]...), planRank[0]) }, []string{"entry 7", "listed twice"}},
		{"rank outside", func(in *PlanInput) { in.Rank = append(append([]ID{}, planRank[:7]...), ID{2, 0}) }, []string{"entry 7", "outside"}},
	} {
		in := basePlanInput()
		tc.edit(&in)
		p, err := MakePlan(in)
		if err == nil {
			t.Errorf("%s: no error; plan %s", tc.name, tierLetters(p))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestPlanSummary(t *testing.T) {
	in := basePlanInput()
	in.VRAMBudgetBytes, in.Tiered, in.HostBudgetBytes = 115<<20, true, 2<<20
	p, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Summary()
	for _, want := range []string{
		"2 layers x 4 experts = 8, 1.0 MiB each", "VRAM expert cache: 3 slots",
		"vram            3   37.5%      3.0 MiB", "pinned          2   25.0%      2.0 MiB", "cold            3   37.5%      3.0 MiB",
		"KV cache:             2.0 MiB (2048 tokens)", "left:                     0 B",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// BenchmarkMakePlan plans a Qwen3-235B-A22B-sized model (94 layers x 128 experts) from a
// profile's rank, as Open does once per load.
func BenchmarkMakePlan(b *testing.B) {
	s := Shape{Layers: 94, Experts: 128, GateBytes: 4096 * 1536 / 256 * 144, UpBytes: 4096 * 1536 / 256 * 144, DownBytes: 4096 * 1536 / 256 * 210}
	p := NewProfile("k", s)
	for i := range p.Count {
		p.Count[i] = uint64(i*7919) % 1000
	}
	in := PlanInput{
		Shape: s, NonExpertBytes: 4 << 30, KVBytesPerToken: 2 * 94 * 4 * 128 * 2, MinContext: 2048, ModelContext: 40960,
		ActivationBytes: 1 << 30, GPUFreeBytes: 15 << 30, VRAMReserveBytes: 1 << 30, ExpertCache: AutoSlots,
		HostAvailBytes: 28 << 30, HostReserveBytes: 8 << 30, Tiered: true,
	}
	b.Run("rank", func(b *testing.B) {
		for b.Loop() {
			p.Rank()
		}
	})
	in.Rank = p.Rank()
	b.Run("plan", func(b *testing.B) {
		for b.Loop() {
			if _, err := MakePlan(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPlanOffersKVChoices: when the KV cache does not fit beside the non-expert weights (or
// beside the slots asked for), the plan says so with the choices and their numbers: the int8
// cache, the longest context that fits, fewer slots; and with auto slots it says what the
// cache costs in slots and what int8 gives back.
func TestPlanOffersKVChoices(t *testing.T) {
	int8In := func(edit func(*PlanInput)) PlanInput {
		in := basePlanInput() // 2 MiB of f16 KV for 2048 tokens
		in.Int8KVBytesPerToken = 512
		edit(&in)
		return in
	}
	for _, tc := range []struct {
		name string
		in   PlanInput
		want []string
	}{
		{"the weights leave 1 MiB of VRAM", int8In(func(in *PlanInput) { in.VRAMBudgetBytes = 111 << 20 }),
			[]string{"needs 2.0 MiB for 2048 tokens but 1.0 MiB is left", "--kv int8 (1.0 MiB for 2048 tokens: fits)", "--max-context 1024 (the longest that fits)"}},
		{"the slots asked for leave 1 MiB", int8In(func(in *PlanInput) { in.VRAMBudgetBytes, in.ExpertCache = 115<<20, 4 }),
			[]string{"--expert-cache 4", "--kv int8 (1.0 MiB for 2048 tokens: fits)", "--max-context 1024", "1 fewer --expert-cache slots"}},
		{"int8 does not fit either", int8In(func(in *PlanInput) { in.VRAMBudgetBytes = 110<<20 + 512<<10 }),
			[]string{"--kv int8 (1.0 MiB for 2048 tokens: does not fit either)", "--max-context 512"}},
	} {
		_, err := MakePlan(tc.in)
		if err == nil {
			t.Errorf("%s: planned", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	// No int8 alternative when the cache is int8 already (or the GPU cannot run it).
	in := basePlanInput()
	in.VRAMBudgetBytes = 111 << 20
	if _, err := MakePlan(in); err == nil || strings.Contains(err.Error(), "--kv int8") || !strings.Contains(err.Error(), "--max-context 1024") {
		t.Errorf("without an int8 choice: %v", err)
	}

	for _, tc := range []struct {
		name string
		in   PlanInput
		want string
	}{
		{"auto slots: the cache costs slots", int8In(func(in *PlanInput) { in.VRAMBudgetBytes = 115 << 20 }),
			"the KV cache of 2048 tokens (2.0 MiB) takes the room of 2 expert slots; with --kv int8 it takes 1.0 MiB and 1 more slots fit"},
		{"CPU: RAM cannot hold the cache beside the weights", int8In(func(in *PlanInput) { in.GPUFreeBytes, in.HostAvailBytes = 0, 111<<20 }),
			"the RAM available (111.0 MiB) cannot hold the KV cache of 2048 tokens (2.0 MiB) beside the 100.0 MiB of non-expert weights and 10.0 MiB of activations; the KV cache needs 2.0 MiB for 2048 tokens but 1.0 MiB is left for it: choose --kv int8 (1.0 MiB for 2048 tokens: fits)"},
	} {
		p, err := MakePlan(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s := p.Summary(); !strings.Contains(s, tc.want) {
			t.Errorf("%s: the plan does not say %q:\n%s", tc.name, tc.want, s)
		}
	}
}

// TestPlanCPUContextGiven: without a GPU the default context's cache gets a quarter of the
// available RAM, a --max-context what the weights and activations leave, as Open checks it.
func TestPlanCPUContextGiven(t *testing.T) {
	in := basePlanInput()
	in.GPUFreeBytes, in.HostAvailBytes = 0, 12<<20
	in.NonExpertBytes, in.ActivationBytes = 1<<20, 1<<20
	in.MinContext, in.ModelContext = 4096, 4096 // 4 MiB of KV
	for _, given := range []bool{false, true} {
		in.ContextGiven = given
		p, err := MakePlan(in)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int{false: 3072, true: 4096}[given] // 3 MiB, a quarter of 12; 10 MiB left
		if p.Context != want {
			t.Errorf("context given %v: %d tokens, want %d", given, p.Context, want)
		}
	}
}
