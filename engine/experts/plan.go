package experts

import (
	"errors"
	"fmt"
	"strings"
)

// PlanInput is everything the planner weighs: the model's sizes, the memory the machine
// has, the knobs, and the profile's order of the experts.
type PlanInput struct {
	Shape          Shape
	NonExpertBytes int64 // attention, norms, router, embeddings, output: on the GPU when there is one
	// HostWeightBytes is the part of NonExpertBytes a GPU start keeps in pinned host memory
	// instead of VRAM (the token embeddings of a file with an output matrix: a step reads
	// only its tokens' rows); 0 without a GPU.
	HostWeightBytes int64
	KVBytesPerToken int64 // all layers, K and V
	// Int8KVBytesPerToken is what a token would take with --kv int8, for the choices a plan
	// offers when the cache does not fit; 0 when the cache is int8 already.
	Int8KVBytesPerToken int64
	MinContext          int // the smallest KV cache worth running (tokens); it must fit
	ModelContext        int // the most context worth planning for (the model's, or --max-context); 0 = MinContext
	// ContextGiven: --max-context asked for MinContext = ModelContext. Without a GPU its cache
	// may take the RAM the weights and activations leave, not only the default's quarter.
	ContextGiven    bool
	ActivationBytes int64 // scratch for activations
	// Batch is the prompt tokens one forward pass takes, which the activations are sized
	// for (--prefill); 0 = not known. Only the messages use it.
	Batch int

	GPUFreeBytes     int64 // 0 = no usable GPU
	VRAMReserveBytes int64 // left free for other apps
	VRAMBudgetBytes  int64 // cap on what Strata takes; 0 = no cap
	ExpertCache      int   // VRAM slots asked for; -1 = auto (as many as fit)
	// HelperSlots are the expert slots asked for on helper GPUs 1 and 2
	// (--expert-cache-device1/2); HelperFreeBytes their free VRAM (0 = not known: the
	// slots are planned unchecked, with a note).
	HelperSlots     [2]int
	HelperFreeBytes [2]int64

	HostAvailBytes   int64 // RAM available now
	HostBudgetBytes  int64 // pinned tier in tiered mode; 0 = auto (HostAvailBytes - HostReserveBytes)
	HostReserveBytes int64 // RAM kept free for the rest of the PC

	Tiered, Resident    bool
	ResidentBudgetBytes int64 // cap on the resident arena; 0 = no cap

	Rank []ID // hottest first (Profile.Rank); nil = the neutral order
}

// AutoSlots asks MakePlan for as many VRAM slots as fit.
const AutoSlots = -1

// Plan is the tier of every expert and what it costs.
type Plan struct {
	Shape Shape
	Slots int // VRAM expert cache slots on the main GPU
	// HelperSlots are the slots on helper GPUs 1 and 2: the experts ranked right after the
	// main GPU's, helper 1's first (all TierHelper).
	HelperSlots [2]int
	Tier        []Tier // [layer*Experts + expert]
	Rank        []ID   // the order the tiers were given in, hottest first

	Bytes           map[Tier]int64 // expert bytes per tier
	NonExpertBytes  int64
	HostWeightBytes int64 // of NonExpertBytes, in pinned host memory rather than VRAM
	KVBytes         int64 // the KV cache for Context positions
	ActivationBytes int64
	Batch           int   // the prefill batch the activations are sized for (0: not known)
	VRAMLimit       int64 // what Strata may take of the GPU; 0 without one
	Context         int   // positions the KV cache gets
	Notes           []string
}

// HelperOf says which helper GPU holds each helper-tier expert ([layer*Experts+expert]; 0
// for helper 1, 1 for helper 2): helper 1 takes the first HelperSlots[0] of them in rank
// order, helper 2 the rest (CacheConfig.HelperOf). nil when no expert is on a helper.
func (p Plan) HelperOf() []int8 {
	if p.HelperSlots == [2]int{} {
		return nil
	}
	of := make([]int8, len(p.Tier))
	k := 0
	for _, id := range p.Rank {
		if i := p.Shape.Index(id); p.Tier[i] == TierHelper {
			if k >= p.HelperSlots[0] {
				of[i] = 1
			}
			k++
		}
	}
	return of
}

// Counts is the number of experts in each tier.
func (p Plan) Counts() map[Tier]int {
	c := map[Tier]int{}
	for _, t := range p.Tier {
		c[t]++
	}
	return c
}

// VRAMUsed is what the plan puts on the GPU: non-expert weights, the expert slots, the KV
// cache and activations. 0 without a GPU.
func (p Plan) VRAMUsed() int64 {
	if p.VRAMLimit == 0 {
		return 0
	}
	return p.VRAMWeightBytes() + p.Bytes[TierVRAM] + p.KVBytes + p.ActivationBytes
}

// VRAMWeightBytes is the non-expert weights the GPU holds.
func (p Plan) VRAMWeightBytes() int64 { return p.NonExpertBytes - p.HostWeightBytes }

const mib = 1 << 20

// mibs writes bytes in MiB, the unit of the VRAM flags: whole when exact, else one decimal.
func mibs(b int64) string {
	if b%mib == 0 {
		return fmt.Sprintf("%d MiB", b/mib)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/mib)
}

// MakePlan gives every expert a tier. It is a pure function of its input: the same input
// always gives the same plan. Inputs no plan can satisfy are errors that say what to change.
func MakePlan(in PlanInput) (Plan, error) {
	s := in.Shape
	if err := checkInput(in); err != nil {
		return Plan{}, err
	}
	rank := in.Rank
	if rank == nil {
		rank = NeutralRank(s)
	}
	if err := checkRank(s, rank); err != nil {
		return Plan{}, err
	}
	blob := s.BlobBytes()
	p := Plan{
		Shape: s, Tier: make([]Tier, s.Count()), Rank: rank, Bytes: map[Tier]int64{},
		NonExpertBytes: in.NonExpertBytes, ActivationBytes: in.ActivationBytes, Batch: in.Batch,
	}
	if in.GPUFreeBytes > 0 {
		p.HostWeightBytes = in.HostWeightBytes
	}
	modelCtx := in.ModelContext
	if modelCtx <= 0 {
		modelCtx = in.MinContext
	}
	minCtx := min(in.MinContext, modelCtx)
	note := func(format string, args ...any) { p.Notes = append(p.Notes, fmt.Sprintf(format, args...)) }

	if in.GPUFreeBytes <= 0 {
		if in.ExpertCache > 0 {
			return Plan{}, fmt.Errorf("plan: --expert-cache %d asks for VRAM slots but there is no usable GPU; use --expert-cache auto (or 0) to run on the CPU", in.ExpertCache)
		}
		if in.HelperSlots != [2]int{} {
			return Plan{}, errors.New("plan: --expert-cache-device1/2 ask for slots on helper GPUs, but there is no usable main GPU; leave them at 0 to run on the CPU")
		}
		for i := range p.Tier {
			p.Tier[i] = TierCPU
		}
		if in.Resident {
			// No GPU: the resident arena holds every expert it has room for, the CPU
			// computes from it, and the rest stays in the file.
			for i := range p.Tier {
				p.Tier[i] = TierCold
			}
			budget := residentBudget(in, s.Count(), blob, note)
			n := pinFirst(&p, rank, budget, blob)
			note("no usable GPU: --resident-experts reads %d of %d experts into a page-locked RAM arena; the CPU computes from it", n, s.Count())
			if n < s.Count() && in.ResidentBudgetBytes > 0 && budget == in.ResidentBudgetBytes {
				note("--resident-budget-gib %.2f caps the RAM arena: %d experts stay cold in the model file", float64(in.ResidentBudgetBytes)/(1<<30), s.Count()-n)
			}
		}
		for _, t := range p.Tier {
			p.Bytes[t] += blob
		}
		// The CPU engine gives the default context's cache a quarter of the available RAM, and
		// one asked for what the non-expert weights and activations leave (as Open checks it).
		room, roomWords := in.HostAvailBytes/4, "a quarter of the available RAM"
		if in.ContextGiven {
			room, roomWords = in.HostAvailBytes-in.NonExpertBytes-in.ActivationBytes, "the available RAM less the non-expert weights and activations"
		}
		p.Context = modelCtx
		if in.HostAvailBytes > 0 && in.KVBytesPerToken > 0 {
			p.Context = int(min(int64(modelCtx), max(room, 0)/in.KVBytesPerToken))
		}
		p.KVBytes = int64(p.Context) * in.KVBytesPerToken
		if p.Context < minCtx {
			note("a KV cache of %d tokens needs %s; %s (%s) holds %d%s", minCtx, humanBytes(int64(minCtx)*in.KVBytesPerToken), roomWords, humanBytes(max(room, 0)), p.Context,
				kvChoices(in, minCtx, room, 0))
		} else if in.HostAvailBytes > 0 && in.NonExpertBytes+int64(minCtx)*in.KVBytesPerToken+in.ActivationBytes > in.HostAvailBytes {
			note("the RAM available (%s) cannot hold the KV cache of %d tokens (%s) beside the %s of non-expert weights and %s of activations%s",
				humanBytes(in.HostAvailBytes), minCtx, humanBytes(int64(minCtx)*in.KVBytesPerToken), humanBytes(in.NonExpertBytes), humanBytes(in.ActivationBytes),
				kvChoices(in, minCtx, in.HostAvailBytes-in.NonExpertBytes-in.ActivationBytes, 0))
		}
		if !in.Resident {
			note("no usable GPU: every expert is computed on the CPU from the mapped model file")
		}
		if in.Tiered {
			note("--tiered-experts places experts around a GPU cache; without a GPU it changes nothing")
		}
		if in.HostBudgetBytes > 0 {
			note("--host-budget-gib sizes a GPU's pinned tier; without a GPU it is unused (--resident-experts with --resident-budget-gib keeps experts in a RAM arena)")
		}
		if !in.Resident && in.ResidentBudgetBytes > 0 {
			note("--resident-budget-gib caps the arena of --resident-experts; without it the budget is unused")
		}
		return p, nil
	}

	// The VRAM Strata may take, and what must fit in it before any expert.
	limit := in.GPUFreeBytes - in.VRAMReserveBytes
	budgetBinds := in.VRAMBudgetBytes > 0 && in.VRAMBudgetBytes < limit
	if budgetBinds {
		limit = in.VRAMBudgetBytes
	}
	weights := p.VRAMWeightBytes()
	minKV := int64(minCtx) * in.KVBytesPerToken
	need := weights + minKV + in.ActivationBytes
	if limit < need {
		return Plan{}, fmt.Errorf("%w%s", vramError(in, limit, need, weights, minCtx, minKV), kvChoices(in, minCtx, limit-weights-in.ActivationBytes, 0))
	}
	p.VRAMLimit = limit
	left := limit - need
	fit := int(min(left/blob, int64(s.Count())))
	switch {
	case in.ExpertCache == AutoSlots:
		p.Slots = fit
		if budgetBinds && fit < s.Count() {
			note("--vram-budget-mib %d caps the expert cache at %d of %d experts", in.VRAMBudgetBytes/mib, fit, s.Count())
		}
	case in.ExpertCache > s.Count():
		if s.Count() > fit {
			return Plan{}, fmt.Errorf("plan: %w: --expert-cache %d: at most %d slots fit (%s left after %s of weights, %s of KV cache for %d tokens and %s; one expert is %s)",
				ErrBudgetTooSmall, in.ExpertCache, fit, mibs(left), mibs(weights), mibs(minKV), minCtx, activations(in), fmt.Sprintf("%.1f MiB", float64(blob)/mib))
		}
		p.Slots = s.Count()
		note("--expert-cache %d is more than the model's %d experts; the cache holds all of them", in.ExpertCache, s.Count())
	case in.ExpertCache > fit:
		return Plan{}, fmt.Errorf("plan: %w: --expert-cache %d: at most %d slots fit (%s left after %s of weights, %s of KV cache for %d tokens and %s; one expert is %s); lower --expert-cache or use auto, or raise --vram-budget-mib / lower --vram-reserve-mib, --max-context or --prefill%s",
			ErrBudgetTooSmall, in.ExpertCache, fit, mibs(left), mibs(weights), mibs(minKV), minCtx, activations(in), fmt.Sprintf("%.1f MiB", float64(blob)/mib),
			kvChoices(in, minCtx, limit-weights-in.ActivationBytes-int64(in.ExpertCache)*blob, blob))
	default:
		p.Slots = in.ExpertCache
	}

	// What the slots leave goes to the KV cache, up to the context worth having.
	kvRoom := limit - weights - in.ActivationBytes - int64(p.Slots)*blob
	p.Context = modelCtx
	if in.KVBytesPerToken > 0 {
		p.Context = int(min(int64(modelCtx), kvRoom/in.KVBytesPerToken))
	}
	p.KVBytes = int64(p.Context) * in.KVBytesPerToken
	if in.ExpertCache == AutoSlots && p.Slots < s.Count() && minKV >= blob {
		// The cache the context needs costs expert slots: say how many, and what int8 gives back.
		int8Words := ""
		if in.Int8KVBytesPerToken > 0 {
			kv8 := int64(minCtx) * in.Int8KVBytesPerToken
			more := min(int((left+minKV-kv8)/blob), s.Count()) - p.Slots
			int8Words = fmt.Sprintf("with --kv int8 it takes %s and %d more slots fit, or ", humanBytes(kv8), more)
		}
		note("the KV cache of %d tokens (%s) takes the room of %d expert slots; %sa shorter --max-context frees %s a token",
			minCtx, humanBytes(minKV), minKV/blob, int8Words, humanBytes(in.KVBytesPerToken))
	}

	for i := range p.Tier {
		p.Tier[i] = TierCold
	}
	for _, id := range rank[:p.Slots] {
		p.Tier[s.Index(id)] = TierVRAM
	}
	rest := rank[p.Slots:]
	for h, n := range in.HelperSlots {
		if n == 0 {
			continue
		}
		if err := checkHelper(in, h, n, blob, note); err != nil {
			return Plan{}, err
		}
		if n > len(rest) {
			note("--expert-cache-device%d %d: only %d experts are left after the GPUs before it; helper GPU %d gets %d slots", h+1, n, len(rest), h+1, len(rest))
			n = len(rest)
		}
		for _, id := range rest[:n] {
			p.Tier[s.Index(id)] = TierHelper
		}
		p.HelperSlots[h], rest = n, rest[n:]
	}
	hostRoom := in.HostAvailBytes - in.HostReserveBytes
	switch {
	case in.Tiered:
		budget := in.HostBudgetBytes
		if budget == 0 {
			budget = max(hostRoom, 0)
		}
		n := pinFirst(&p, rest, budget, blob)
		if n < len(rest) {
			note("the pinned tier is capped by the host budget (%s): %d experts pinned, %d cold on the SSD", humanBytes(budget), n, len(rest)-n)
		}
		if in.HostBudgetBytes > 0 && in.HostAvailBytes > 0 && int64(n)*blob > hostRoom {
			note("--host-budget-gib %.2f pins %s but only %s of RAM are available beyond the %s reserve", float64(in.HostBudgetBytes)/(1<<30), humanBytes(int64(n)*blob), humanBytes(max(hostRoom, 0)), humanBytes(in.HostReserveBytes))
		}
	case in.Resident:
		budget := residentBudget(in, len(rest), blob, note)
		n := pinFirst(&p, rest, budget, blob)
		if n < len(rest) && in.ResidentBudgetBytes > 0 && budget == in.ResidentBudgetBytes {
			note("--resident-budget-gib %.2f caps the RAM arena: %d experts resident, %d cold on the SSD", float64(in.ResidentBudgetBytes)/(1<<30), n, len(rest)-n)
		}
	}
	if !in.Tiered && in.HostBudgetBytes > 0 {
		note("--host-budget-gib sizes the pinned tier of --tiered-experts; without it the budget is unused")
	}
	if !in.Resident && in.ResidentBudgetBytes > 0 {
		note("--resident-budget-gib caps the arena of --resident-experts; without it the budget is unused")
	}
	for _, t := range p.Tier {
		p.Bytes[t] += blob
	}
	if p.Slots == s.Count() {
		note("every expert fits in VRAM")
	}
	return p, nil
}

// residentBudget is what the resident arena may take for n experts of blob bytes: the
// --resident-budget-gib cap (all of them when 0), never more than the available RAM beyond
// the --host-reserve-gib reserve, so filling it at start never pushes the PC below the
// reserve. The cut is noted.
func residentBudget(in PlanInput, n int, blob int64, note func(string, ...any)) int64 {
	budget := in.ResidentBudgetBytes
	if budget == 0 {
		budget = int64(n) * blob
	}
	if in.HostAvailBytes > 0 {
		if room := max(in.HostAvailBytes-in.HostReserveBytes, 0); budget > room {
			note("the RAM arena is capped at the %s of RAM available beyond the --host-reserve-gib %.2f reserve: %d of %d experts fit, the rest stay cold; lower the reserve or close other programs for more", humanBytes(room), float64(in.HostReserveBytes)/(1<<30), room/blob, n)
			budget = room
		}
	}
	return budget
}

// HelperOverheadBytes is what a helper GPU needs beside its expert slots: its CUDA context,
// kernels, the hidden state it is sent and the rows its results come back in.
const HelperOverheadBytes = 512 * mib

// checkHelper refuses n slots on helper h (0 or 1) that its free VRAM cannot hold; with the
// free VRAM unknown it notes that the slots are unchecked.
func checkHelper(in PlanInput, h, n int, blob int64, note func(string, ...any)) error {
	flag := fmt.Sprintf("--expert-cache-device%d", h+1)
	free := in.HelperFreeBytes[h]
	if free <= 0 {
		note("%s %d: helper GPU %d's free VRAM is not known; its %s of slots are not checked against it", flag, n, h+1, humanBytes(int64(n)*blob))
		return nil
	}
	fit := max(free-HelperOverheadBytes, 0) / blob
	if int64(n) > fit {
		return fmt.Errorf("plan: %w: %s %d: helper GPU %d has %s free, which holds at most %d slots of %.1f MiB beside its %s of context and buffers; lower %s",
			ErrBudgetTooSmall, flag, n, h+1, mibs(free), fit, float64(blob)/mib, mibs(HelperOverheadBytes), flag)
	}
	return nil
}

// pinFirst makes the first experts of ids pinned while they fit in budget and returns how
// many it pinned.
func pinFirst(p *Plan, ids []ID, budget, blob int64) int {
	n := int(min(max(budget, 0)/blob, int64(len(ids))))
	for _, id := range ids[:n] {
		p.Tier[p.Shape.Index(id)] = TierPinned
	}
	return n
}

// kvChoices are the ways to make a KV cache of ctx tokens fit in room bytes, in words with
// numbers, as "; " and a sentence (empty when it fits): the int8 cache, the longest context
// that fits, and with blob > 0 (slots were asked for) the slots one cache's worth frees.
func kvChoices(in PlanInput, ctx int, room, blob int64) string {
	need := int64(ctx) * in.KVBytesPerToken
	if need <= room || in.KVBytesPerToken <= 0 {
		return ""
	}
	var c []string
	if in.Int8KVBytesPerToken > 0 {
		n8 := int64(ctx) * in.Int8KVBytesPerToken
		verdict := "fits"
		if n8 > room {
			verdict = "does not fit either"
		}
		c = append(c, fmt.Sprintf("--kv int8 (%s for %d tokens: %s)", humanBytes(n8), ctx, verdict))
	}
	if fit := max(room, 0) / in.KVBytesPerToken; fit >= 256 {
		c = append(c, fmt.Sprintf("--max-context %d (the longest that fits)", fit-fit%256))
	}
	if blob > 0 {
		c = append(c, fmt.Sprintf("%d fewer --expert-cache slots", (need-max(room, 0)+blob-1)/blob))
	}
	if len(c) == 0 {
		return ""
	}
	return fmt.Sprintf("; the KV cache needs %s for %d tokens but %s is left for it: choose %s", humanBytes(need), ctx, humanBytes(max(room, 0)), strings.Join(c, ", or "))
}

// ErrBudgetTooSmall is wrapped by the error for a memory budget that cannot hold what the
// model needs before any expert, or the expert slots asked for.
var ErrBudgetTooSmall = errors.New("budget too small")

// vramError says why the GPU cannot hold the non-expert part and what to change.
func vramError(in PlanInput, limit, need, weights int64, minCtx int, minKV int64) error {
	var from string
	if in.VRAMBudgetBytes > 0 && in.VRAMBudgetBytes <= in.GPUFreeBytes-in.VRAMReserveBytes {
		from = fmt.Sprintf("the --vram-budget-mib %d cap", in.VRAMBudgetBytes/mib)
	} else {
		from = fmt.Sprintf("%s free less the --vram-reserve-mib %d", mibs(in.GPUFreeBytes), in.VRAMReserveBytes/mib)
	}
	return fmt.Errorf("plan: %w: the GPU has %s for Strata (%s) but it needs %s before any expert: %s of non-expert weights, %s of KV cache for %d tokens (--max-context), %s; raise --vram-budget-mib, lower --vram-reserve-mib, --max-context or --prefill, close other GPU apps, or use --backend cpu",
		ErrBudgetTooSmall, mibs(max(limit, 0)), from, mibs(need), mibs(weights), mibs(minKV), minCtx, activations(in))
}

// activations says what the activations take, and for which batch when it is known.
func activations(in PlanInput) string {
	if in.Batch > 0 {
		return fmt.Sprintf("%s of activations for prefill batches of %d tokens (--prefill)", mibs(in.ActivationBytes), in.Batch)
	}
	return mibs(in.ActivationBytes) + " of activations"
}

// checkInput rejects numbers no machine or model has.
func checkInput(in PlanInput) error {
	s := in.Shape
	var errs []error
	if s.Layers <= 0 || s.Experts <= 0 {
		errs = append(errs, fmt.Errorf("shape of %d layers x %d experts", s.Layers, s.Experts))
	}
	if s.GateBytes < 0 || s.UpBytes < 0 || s.DownBytes < 0 || s.BlobBytes() <= 0 {
		errs = append(errs, fmt.Errorf("expert of %d+%d+%d bytes", s.GateBytes, s.UpBytes, s.DownBytes))
	}
	for _, v := range []struct {
		name string
		n    int64
	}{
		{"non-expert bytes", in.NonExpertBytes}, {"non-expert bytes in host memory", in.HostWeightBytes}, {"KV bytes per token", in.KVBytesPerToken},
		{"minimum context", int64(in.MinContext)}, {"model context", int64(in.ModelContext)},
		{"activation bytes", in.ActivationBytes}, {"free VRAM", in.GPUFreeBytes},
		{"--vram-reserve-mib", in.VRAMReserveBytes}, {"--vram-budget-mib", in.VRAMBudgetBytes},
		{"available RAM", in.HostAvailBytes}, {"--host-budget-gib", in.HostBudgetBytes},
		{"--host-reserve-gib", in.HostReserveBytes}, {"--resident-budget-gib", in.ResidentBudgetBytes},
	} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("%s is negative (%d)", v.name, v.n))
		}
	}
	if in.HostWeightBytes > in.NonExpertBytes {
		errs = append(errs, fmt.Errorf("%d non-expert bytes in host memory of %d in all", in.HostWeightBytes, in.NonExpertBytes))
	}
	if in.ExpertCache < AutoSlots {
		errs = append(errs, fmt.Errorf("--expert-cache %d: give a slot count or auto", in.ExpertCache))
	}
	for h, n := range in.HelperSlots {
		if n < 0 || in.HelperFreeBytes[h] < 0 {
			errs = append(errs, fmt.Errorf("--expert-cache-device%d %d with %d bytes free: negative", h+1, n, in.HelperFreeBytes[h]))
		}
	}
	if in.Tiered && in.Resident {
		errs = append(errs, errors.New("--tiered-experts and --resident-experts cannot be combined; pick one"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

// checkRank requires every expert exactly once.
func checkRank(s Shape, rank []ID) error {
	if len(rank) != s.Count() {
		return fmt.Errorf("plan: the rank lists %d experts, the model has %d", len(rank), s.Count())
	}
	seen := make([]bool, s.Count())
	for i, id := range rank {
		if id.Layer < 0 || id.Layer >= s.Layers || id.Expert < 0 || id.Expert >= s.Experts {
			return fmt.Errorf("plan: rank entry %d (%v) is outside the model's %d layers x %d experts", i, id, s.Layers, s.Experts)
		}
		if seen[s.Index(id)] {
			return fmt.Errorf("plan: rank entry %d (%v) is listed twice", i, id)
		}
		seen[s.Index(id)] = true
	}
	return nil
}

// Summary is a human table of the plan: tiers, slots, bytes, KV cache and what is left.
func (p Plan) Summary() string {
	var b strings.Builder
	counts := p.Counts()
	total := p.Shape.Count()
	fmt.Fprintf(&b, "experts: %d layers x %d experts = %d, %.1f MiB each\n", p.Shape.Layers, p.Shape.Experts, total, float64(p.Shape.BlobBytes())/mib)
	if p.VRAMLimit > 0 {
		fmt.Fprintf(&b, "VRAM expert cache: %d slots\n", p.Slots)
	}
	for h, n := range p.HelperSlots {
		if n > 0 {
			fmt.Fprintf(&b, "helper GPU %d: %d slots, %s\n", h+1, n, humanBytes(int64(n)*p.Shape.BlobBytes()))
		}
	}
	fmt.Fprintf(&b, "\n%-8s %8s %7s %12s\n", "tier", "experts", "share", "bytes")
	for _, t := range []Tier{TierVRAM, TierHelper, TierPinned, TierCold, TierCPU} {
		if counts[t] == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-8s %8d %6.1f%% %12s\n", t, counts[t], 100*float64(counts[t])/float64(max(total, 1)), humanBytes(p.Bytes[t]))
	}
	fmt.Fprintln(&b)
	if p.VRAMLimit > 0 {
		fmt.Fprintf(&b, "VRAM for Strata:   %12s\n", humanBytes(p.VRAMLimit))
		fmt.Fprintf(&b, "  weights:         %12s (non-expert)\n", humanBytes(p.VRAMWeightBytes()))
		fmt.Fprintf(&b, "  expert cache:    %12s\n", humanBytes(p.Bytes[TierVRAM]))
		fmt.Fprintf(&b, "  KV cache:        %12s (%d tokens)\n", humanBytes(p.KVBytes), p.Context)
		if p.Batch > 0 {
			fmt.Fprintf(&b, "  activations:     %12s (prefill batches of %d tokens)\n", humanBytes(p.ActivationBytes), p.Batch)
		} else {
			fmt.Fprintf(&b, "  activations:     %12s\n", humanBytes(p.ActivationBytes))
		}
		fmt.Fprintf(&b, "  left:            %12s\n", humanBytes(p.VRAMLimit-p.VRAMUsed()))
		if p.HostWeightBytes > 0 {
			fmt.Fprintf(&b, "token embeddings:  %12s in pinned RAM, not VRAM (a step reads only its tokens' rows)\n", humanBytes(p.HostWeightBytes))
		}
	} else {
		fmt.Fprintf(&b, "RAM: weights %s (non-expert), KV cache %s (%d tokens), activations %s\n",
			humanBytes(p.NonExpertBytes), humanBytes(p.KVBytes), p.Context, humanBytes(p.ActivationBytes))
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
