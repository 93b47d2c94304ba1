package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/platform"
)

// streamMinTokens: batches of at least this many tokens stream the experts they miss into
// VRAM (a read of each expert serves many tokens); smaller ones, decode above all, compute
// misses on the CPU pool while the GPU runs the hits.
const streamMinTokens = 32

// placement is where an opened model's weights went.
type placement struct {
	backend compute.Backend // runs everything but the tiered experts
	host    *cpu.Backend    // the CPU pool for expert misses, when it is not backend
	// helpers are the helper GPUs (helper 1, helper 2; nil for one without slots) that hold
	// the helper tier's experts.
	helpers [2]*gpu.Backend
	cache   *experts.Cache // nil unless the experts are tiered
	net     *model.Model

	layout   *experts.Layout // the experts in the GGUF
	pack     *experts.Layout // experts.bin next to the model, when it matches
	arena    *experts.Arena  // the pinned / resident experts
	prefetch *experts.Prefetcher
	cold     *experts.ColdReader // batches' cold experts, around the page cache (tiered)
	fill     experts.FillStats
	notes    []string  // what the tiers could not do as planned (shown in the tier map)
	pins     pinBudget // page-locked host memory counted against --pinned-budget-mib / WSL2
	// embdInHost is the bytes of the token-embedding table in pinned host memory (0: in VRAM).
	embdInHost int64
	// arenaNotPinned says why the pinned expert tier stayed in plain RAM ("" when it did not).
	arenaNotPinned string
	verify         []string // checksums for --verify
	warm           *warmer  // maps the file's pages after a CPU load; nil when not worth it
	// batch is the prefill batch the plan sized the activations for (0: no plan; --prefill
	// or defaultPrefill).
	batch int
}

func (p *placement) close() error {
	var errs []error
	if p.warm != nil {
		p.warm.stop() // before anything unmaps the file
	}
	if p.cache != nil {
		p.cache.FinishMisses() // the stream may wait for them, and they read the arena
	}
	if p.backend != nil {
		errs = append(errs, p.backend.Close()) // unregisters the arena before it is freed
	}
	if p.host != nil {
		errs = append(errs, p.host.Close())
	}
	for _, h := range p.helpers {
		if h != nil {
			errs = append(errs, h.Close())
		}
	}
	if p.prefetch != nil {
		p.prefetch.Close()
	}
	if p.cold != nil {
		errs = append(errs, p.cold.Close())
	}
	if p.arena != nil {
		errs = append(errs, p.arena.Close())
	}
	for _, l := range []*experts.Layout{p.pack, p.layout} {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(errs...)
}

func (p *placement) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	slog.Warn("engine: " + msg)
	p.notes = append(p.notes, msg)
}

// mapModel maps the model file when it is not mapped yet (gguf.OpenUnmapped), reporting
// phase first when it is not "".
func mapModel(f *gguf.File, phase string, report func(Progress)) error {
	if f.Mapped() {
		return nil
	}
	if phase != "" {
		report(Progress{Phase: phase})
	}
	return f.Map()
}

// tierKnobsSet says whether the user asked for the expert tiers explicitly.
func tierKnobsSet(cfg Config) bool {
	return (cfg.ExpertCache != Auto) || cfg.TieredExperts || cfg.ResidentExperts || cfg.pcieShareGiven() || cfg.AdaptEvery > 0 || helperSlotsSet(cfg)
}

// adaptEvery is the cache's adaptive swap period: the knob, or for Auto AutoAdaptEvery on
// a GPU (without one the cache has no VRAM slots to swap into).
func adaptEvery(cfg Config, onGPU bool) int {
	switch {
	case cfg.AdaptEvery != Auto:
		return cfg.AdaptEvery
	case onGPU:
		return AutoAdaptEvery
	}
	return 0
}

// helperSlotsSet says whether the config gives helper GPUs slots.
func helperSlotsSet(cfg Config) bool { return cfg.ExpertCacheDevice1 > 0 || cfg.ExpertCacheDevice2 > 0 }

// place opens the backend(s) and loads the weights: everything on the CPU; everything on
// one GPU when it fits (or --backend cuda without tier knobs); or, when the model is larger
// than the GPU or the tier knobs ask for it, the experts tiered across a VRAM cache, host
// memory and the file by the plan. Without a GPU, --resident-experts still reads the experts
// into a page-locked RAM arena for the CPU. f may be unmapped (gguf.OpenUnmapped): place
// maps it before anything reads through the mapping, after the arena fill when there is one.
func place(ctx context.Context, f *gguf.File, cfg Config, info ModelInfo, report func(Progress)) (*placement, error) {
	// The order matters under WSL2, where the driver pins or maps about 1 GiB of host memory
	// for the whole VM: every GPU context, the main card's and the helpers', is created
	// here, first, before any weight, staging buffer, arena registration or file mapping is
	// allocated (Open has only read the header), so a context's own pinned memory is never
	// the allocation that fails. (The order is the same outside WSL2: it costs nothing.)
	b, whole, err := newBackend(cfg, info)
	if err != nil {
		return nil, err
	}
	g, isGPU := b.(*gpu.Backend)
	p := &placement{backend: b, pins: newPinBudget(cfg, detectWSL(), isGPU)}
	if helperSlotsSet(cfg) {
		if !isGPU {
			err = &ConfigError{Flag: "expert-cache-device1/2", Msg: fmt.Sprintf("helper GPU slots need the model on a main GPU, but it runs on the CPU (%s); leave them at 0", b.Name())}
		} else {
			p.helpers, err = openHelpers(cfg, g)
		}
		if err != nil {
			p.close()
			return nil, err
		}
	}
	if p.pins.capped() {
		slog.Info("engine: pinned host memory is capped", "budget", p.pins.String())
	}
	if isGPU {
		for _, d := range append([]*gpu.Backend{g}, p.helpers[:]...) {
			if d != nil && !p.pins.take(stepInputPinBytes) {
				err = p.pins.tooSmall("the GPU backend's step inputs", stepInputPinBytes)
				p.close()
				return nil, err
			}
		}
	}
	switch {
	case isGPU && !whole:
		err = p.tiered(ctx, f, cfg, info, g, g.FreeBytes(), p.helperDevices(), report)
	case !isGPU && cfg.ResidentExperts:
		c := b.(*cpu.Backend)
		err = p.tiered(ctx, f, cfg, info, experts.HostDevice{Backend: c}, 0, nil, report)
	default:
		if !isGPU && cfg.ExpertCache > 0 {
			err = fmt.Errorf("engine: --expert-cache %d asks for VRAM slots, but the model runs on the CPU (%s); use --expert-cache auto", cfg.ExpertCache, b.Name())
			break
		}
		if !isGPU && (cfg.TieredExperts || cfg.pcieShareGiven() || cfg.AdaptEvery > 0) {
			slog.Warn("engine: the model runs on the CPU: the expert tier knobs (--tiered-experts, --pcie-frac, --adapt-every) change nothing")
		}
		if err = mapModel(f, "", report); err != nil {
			break
		}
		if err = p.reserveRegion(f, b, nil, 0); err != nil {
			break
		}
		p.net, err = model.Load(f, b, func(done, total int64) {
			report(Progress{Phase: "weights", Done: done, Total: total})
		})
		switch {
		case err != nil || isGPU:
		case warmFits(f.TotalSize(), platform.ProbeMemory(ctx).AvailableBytes):
			parts := make([][]byte, f.PartCount())
			for i := range parts {
				parts[i] = f.Part(i).Mapping()
			}
			p.warm = startWarm(parts, os.Getpagesize(), f.Path)
		default:
			// The file does not fit RAM: every step reads its experts from the disk.
			if c, ok := b.(*cpu.Backend); ok {
				c.SetPopulateExperts(true)
			}
		}
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// forceWSL2Env, set to 1, makes Open treat the machine as WSL2 (the driver's pinned budget
// applies to a GPU start). It exists for tests of the WSL2 start on a Linux machine.
const forceWSL2Env = "STRATA_FORCE_WSL2"

// detectWSL is platform.DetectWSL, or WSL2 where forceWSL2Env says so.
func detectWSL() platform.WSL {
	if os.Getenv(forceWSL2Env) == "1" {
		return platform.WSL{WSL2: true, Evidence: []string{forceWSL2Env + "=1"}, PinnedBudgetBytes: platform.WSLPinnedBudgetBytes}
	}
	return platform.DetectWSL()
}

// asyncMissesEnv, set to 0, makes a tiered decode finish each layer's CPU misses before it
// queues the next layer (experts.CacheConfig.AsyncMisses off), for A/B runs.
const asyncMissesEnv = "STRATA_ASYNC_MISSES"

// helpersOnMainEnv, set to 1, opens the helper GPUs on the main card's ordinal, each in a
// context of its own (cuCtxCreate) beside the main card's primary one. It exists for tests:
// one GPU then runs the helper path as two cards would.
const helpersOnMainEnv = "STRATA_HELPERS_ON_MAIN"

// openHelpers opens a backend on each helper GPU that has slots: helper 1 is the card with
// the most free VRAM after the main one, helper 2 the next (the main card is cfg.MainGPU, or
// the one with the most free VRAM).
func openHelpers(cfg Config, main *gpu.Backend) (hs [2]*gpu.Backend, err error) {
	onMain := os.Getenv(helpersOnMainEnv) == "1"
	ords := helperOrdinals(main.Ordinal(), main.DevicesFree(), onMain)
	for i, slots := range [2]int{cfg.ExpertCacheDevice1, cfg.ExpertCacheDevice2} {
		if slots == 0 {
			continue
		}
		if i >= len(ords) {
			err = &ConfigError{Flag: fmt.Sprintf("expert-cache-device%d", i+1), Msg: fmt.Sprintf("%d slots, but there is no helper GPU %d (%d GPUs found, GPU %d is the main one); leave it at 0", slots, i+1, len(ords)+1, main.Ordinal())}
			break
		}
		var h *gpu.Backend
		if h, err = gpu.New(gpu.Options{Device: ords[i], OwnContext: onMain, BudgetBytes: int64(cfg.VRAMBudgetMiB) << 20}); err != nil {
			err = fmt.Errorf("engine: helper GPU %d (GPU %d): %w", i+1, ords[i], err)
			break
		}
		hs[i] = h
		slog.Info("engine: helper GPU open", "helper", i+1, "gpu", ords[i], "name", h.Name(), "free_mib", h.FreeBytes()>>20, "own_context", onMain)
	}
	if err != nil {
		for _, h := range hs {
			if h != nil {
				h.Close()
			}
		}
		return [2]*gpu.Backend{}, err
	}
	return hs, nil
}

// helperOrdinals orders the cards other than main by free VRAM, the most first (free is by
// ordinal); onMain (the test hook) gives the main card twice instead.
func helperOrdinals(main int, free []int64, onMain bool) []int {
	if onMain {
		return []int{main, main}
	}
	var ords []int
	for i := range free {
		if i != main {
			ords = append(ords, i)
		}
	}
	slices.SortStableFunc(ords, func(a, b int) int { return cmp.Compare(free[b], free[a]) })
	return ords
}

// helperDevices is the expert cache's view of the helpers: helper 1 then helper 2, as far
// as the last one open (a helper without slots stays nil).
func (p *placement) helperDevices() []experts.Device {
	n := 0
	for i, h := range p.helpers {
		if h != nil {
			n = i + 1
		}
	}
	hs := make([]experts.Device, n)
	for i := range n {
		if p.helpers[i] != nil {
			hs[i] = p.helpers[i]
		}
	}
	return hs
}

// tiered plans the experts' tiers, reads the pinned ones into the RAM arena, and loads the
// model through the expert cache on dev (the GPU, or the CPU standing in for it), with the
// helper tier on helpers (helper GPU 1, 2: --expert-cache-device1/2, opened by place; tests
// pass CPU stand-ins).
func (p *placement) tiered(ctx context.Context, f *gguf.File, cfg Config, info ModelInfo, dev experts.Device, gpuFree int64, helpers []experts.Device, report func(Progress)) error {
	s, err := expertShape(f, info)
	if err != nil {
		return err
	}
	var rank []experts.ID
	if prof, _ := loadProfile(f, s); prof != nil {
		rank = prof.Rank()
	}
	onGPU := gpuFree > 0
	in := planInput(info, s, gpuFree, platform.ProbeMemory(ctx).AvailableBytes, cfg, rank)
	if _, ok := dev.(hostPlacer); ok {
		in.HostWeightBytes = plannedHostWeights(f, p.pins, onGPU)
	}
	if n := pinsImplicitlyNote(cfg, onGPU); n != "" {
		slog.Info("engine: plan", "note", n)
	}
	for h, n := range in.HelperSlots {
		if n == 0 {
			continue
		}
		if h >= len(helpers) || helpers[h] == nil {
			return fmt.Errorf("engine: --expert-cache-device%d %d: helper GPU %d is not open (%d helpers)", h+1, n, h+1, len(helpers))
		}
		if fb, ok := helpers[h].(interface{ FreeBytes() int64 }); ok {
			in.HelperFreeBytes[h] = fb.FreeBytes()
		}
	}
	h, err := model.ReadHparams(f)
	if err != nil {
		return err
	}
	// The streaming ring (one layer's experts) comes out of the activations' share.
	bp, err := planBatch(f, h, in, cfg, onGPU)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	plan, ring := bp.plan, bp.ring
	p.batch = bp.batch
	for _, n := range plan.Notes {
		slog.Info("engine: plan", "note", n)
	}
	var pinned, vram []experts.ID
	for i, t := range plan.Tier {
		id := experts.ID{Layer: i / s.Experts, Expert: i % s.Experts}
		switch t {
		case experts.TierPinned:
			pinned = append(pinned, id)
		case experts.TierVRAM:
			vram = append(vram, id)
		}
	}
	cold := s.Count() - len(pinned) - len(vram)
	if onGPU {
		// The staging ring the VRAM fill and streamed experts pass through comes out of the
		// pinned budget before the arena: it is small, and the GPU cannot upload without it.
		bufs, size, fallback, err := stagingShare(&p.pins, ringParts(helpers, plan.Tier))
		if err != nil {
			return err
		}
		if st, ok := dev.(interface{ SetStaging(bufs, bufBytes int) }); ok {
			st.SetStaging(bufs, size)
		}
		if fallback != "" {
			p.note("the pinned budget of %s holds %s", p.pins.String(), fallback)
		}
	}
	helperRows := 0
	if slices.Contains(plan.Tier, experts.TierHelper) {
		if helperRows, err = p.helperPins(f, cfg, helpers); err != nil {
			return err
		}
	}

	if hp, ok := dev.(hostPlacer); ok {
		p.embeddingsInHost(f, hp)
	}

	var host *cpu.Backend
	if hd, ok := dev.(experts.HostDevice); ok {
		host = hd.Backend // the CPU computes everything: one pool
	} else {
		host = cpu.New(cpu.Options{Threads: cfg.Threads})
		p.host = host
	}
	if len(pinned) > 0 || cold > 0 {
		// On an unmapped file the layout has extents but no views until Attach.
		if p.layout, err = experts.GGUFLayout(f); err != nil {
			return err
		}
	}
	cc := experts.CacheConfig{
		Shape: s, Tier: plan.Tier, Rank: plan.Rank,
		PCIeFrac: max(cfg.PCIeFrac, 0), AdaptEvery: adaptEvery(cfg, onGPU),
		AsyncMisses: os.Getenv(asyncMissesEnv) != "0",
		StreamSlots: ring, StreamMinTokens: streamMinTokens,
		Helpers: helpers, HelperOf: plan.HelperOf(), HelperRows: helperRows,
	}
	if len(pinned) > 0 {
		if err := p.fillArena(ctx, f, cfg, dev, onGPU, pinned, report); err != nil {
			return err
		}
		cc.Pinned, cc.PinnedMapped = p.arena, onGPU && p.fill.Locked
		// Auto tunes the share only where the GPU can read the pinned experts: elsewhere it
		// would report a share of reads that cannot happen.
		cc.PCIeAuto = cfg.PCIeFrac == Auto && cc.PinnedMapped
	}
	// Everything from here on reads the file through the mapping: the non-expert weights,
	// the VRAM fill, the cold experts.
	phase := ""
	if len(pinned) > 0 {
		phase = "mapping" // a new phase after the RAM copy
	}
	if err := mapModel(f, phase, report); err != nil {
		return err
	}
	if p.layout != nil {
		if err := p.layout.Attach(); err != nil {
			return err
		}
	}
	if cold > 0 {
		p.prefetch = experts.NewPrefetcher(p.layout, 4)
		cc.Prefetch = p.prefetch
	}
	if cold > 0 && onGPU && in.Tiered {
		first := slices.Index(plan.Tier, experts.TierCold)
		var why string
		if p.cold, why = experts.NewColdReader(p.layout, experts.ID{Layer: first / s.Experts, Expert: first % s.Experts}, 4); p.cold == nil {
			p.note("prompts read cold experts through the page cache: %s", why)
		}
		cc.Cold = p.cold
	}
	if p.cache, err = experts.NewCache(dev, host, cc); err != nil {
		return err
	}
	if err := p.reserveRegion(f, dev, p.cache, s.Layers); err != nil {
		return err
	}
	if p.net, err = model.LoadWith(f, dev, func(done, total int64) {
		report(Progress{Phase: "weights", Done: done, Total: total})
	}, p.cache.Layer); err != nil {
		return err
	}
	if err := p.cache.Fill(ctx, func(done, total int64) {
		report(Progress{Phase: "vram-fill", Done: done, Total: total})
	}); err != nil {
		return err
	}
	if p.layout != nil {
		// The file's pages of experts held elsewhere are not needed in RAM any more.
		if err := experts.DropPages(p.layout, append(vram, pinned...)); err != nil {
			slog.Info("engine: could not drop the pages of cached experts", "reason", err)
		}
	}
	if cfg.Verify || os.Getenv("STRATA_VERIFY_COMPLEMENT") == "1" {
		p.verifyChecksums()
	}
	return nil
}

// helperPins takes the helper GPUs' page-locked memory from the pinned budget, after the
// main card's staging ring and before the arena: each helper's staging ring (its slots are
// filled through it), then its result rows, a prefill batch of them, fewer when the budget
// is short (a batch then comes back in rounds), down to one token's. It returns the rows.
func (p *placement) helperPins(f *gguf.File, cfg Config, helpers []experts.Device) (int, error) {
	h, err := model.ReadHparams(f)
	if err != nil {
		return 0, err
	}
	var open []int
	for i, d := range helpers {
		if d != nil {
			open = append(open, i)
		}
	}
	for k, i := range open {
		bufs, size, fallback, err := stagingShare(&p.pins, len(open)-k+1)
		if err != nil {
			return 0, fmt.Errorf("helper GPU %d: %w", i+1, err)
		}
		if st, ok := helpers[i].(interface{ SetStaging(bufs, bufBytes int) }); ok {
			st.SetStaging(bufs, size)
		}
		if fallback != "" {
			p.note("the pinned budget of %s holds %s for helper GPU %d", p.pins.String(), fallback, i+1)
		}
	}
	rowBytes := int64(4 * h.Hidden * len(open))
	want := prefillBatchOf(cfg)
	if p.batch > 0 {
		want = p.batch // what the plan sized the activations for
	}
	rows := want
	for rows > 1 && !p.pins.take(int64(rows)*rowBytes) {
		rows /= 2
	}
	if rows == 1 && !p.pins.take(rowBytes) {
		return 0, p.pins.tooSmall(fmt.Sprintf("the helper GPUs' result rows (one token's: %d helpers x %d floats)", len(open), h.Hidden), rowBytes)
	}
	if rows < want {
		p.note("the pinned budget of %s holds the helper GPUs' results for %d tokens at a time instead of %d: a longer batch comes back in rounds", p.pins.String(), rows, want)
	}
	return rows, nil
}

// ringParts is how many shares of a capped pinned budget the main card's staging ring
// leaves room for: with experts on helpers, a ring for each open helper and one share for
// their result rows (and the arena) after its own; else it takes what it wants.
func ringParts(helpers []experts.Device, tier []experts.Tier) int {
	if !slices.Contains(tier, experts.TierHelper) {
		return 1
	}
	n := 2
	for _, d := range helpers {
		if d != nil {
			n++
		}
	}
	return n
}

// hostPlacer is a device that can keep a tensor in pinned host memory (gpu.Backend).
type hostPlacer interface{ PlaceInHost(name string) }

// embeddingsInHost puts the token-embedding table in pinned host memory, where a step reads
// only its tokens' rows over PCIe, so its VRAM goes to expert slots; it stays in the main
// card's VRAM when the output layer shares it (tied embeddings: every step reads all of it)
// or, with one log line, when the pinned budget cannot hold it.
func (p *placement) embeddingsInHost(f *gguf.File, g hostPlacer) {
	const name = "token_embd.weight"
	ti, ok := hostEmbeddings(f)
	if !ok {
		return
	}
	n := gpu.PlacedBytes(ti.Type, int(ti.Ne[1]), int(ti.Ne[0]), ti.Size)
	if !p.pins.take(n) {
		p.note("the token-embedding table stays in the main card's VRAM: its %.1f MiB do not fit the pinned budget of %s (%.1f MiB left)", mib(n), p.pins.String(), mib(max(p.pins.left(), 0)))
		return
	}
	g.PlaceInHost(name)
	p.embdInHost = n
}

// hostEmbeddings is the token-embedding table when a GPU start may keep it in pinned host
// memory: the file has an output matrix of its own, so no step reads the whole table.
func hostEmbeddings(f *gguf.File) (gguf.TensorInfo, bool) {
	ti, ok := f.Tensor("token_embd.weight")
	_, out := f.Tensor("output.weight")
	return ti, ok && out && len(ti.Ne) == 2
}

// plannedHostWeights is what the planner may leave out of the VRAM for the weights a tiered
// GPU start puts in pinned host memory (embeddingsInHost; a start that fits whole keeps
// them in VRAM). Under a pinned cap they may not fit it, and the plan counts them in VRAM: a
// start that puts them in host then leaves VRAM unused rather than over its budget.
func plannedHostWeights(f *gguf.File, pins pinBudget, tieredOnGPU bool) int64 {
	ti, ok := hostEmbeddings(f)
	if !tieredOnGPU || pins.capped() || !ok {
		return 0
	}
	return ti.Size
}

// prefillBatchOf is the prompt chunk a forward pass takes (Session.prefillBatch).
func prefillBatchOf(cfg Config) int {
	if cfg.Prefill > 0 {
		return cfg.Prefill
	}
	return defaultPrefill
}

// fillArena reads the pinned experts into one RAM arena (from experts.bin when it sits next
// to the model, with unbuffered reads so the page cache keeps no second copy) and
// page-locks it: registered with the GPU, so it can read the experts over PCIe, or locked
// with the OS when there is no GPU. Failing either keeps the copy unlocked, and says so.
func (p *placement) fillArena(ctx context.Context, f *gguf.File, cfg Config, dev experts.Device, onGPU bool, ids []experts.ID, report func(Progress)) error {
	src := p.layout
	if pk, ok := experts.FindPack(f); ok {
		p.pack, src = pk, pk
	}
	// The pinned expert tier is the largest page-locked allocation: it is pinned only when
	// all of it fits the budget left, else it stays in plain RAM, where the CPU computes its
	// experts (the GPU cannot read unpinned memory over PCIe).
	want := experts.ArenaBytes(src.Shape, len(ids))
	pin := p.pins.take(want)
	if !pin {
		p.arenaNotPinned = fmt.Sprintf("its %.0f MiB do not fit the pinned budget of %s (%.0f MiB left)", mib(want), p.pins.String(), mib(max(p.pins.left(), 0)))
		p.note("the pinned expert tier is not pinned: %s; the CPU computes its experts from plain RAM (raise --pinned-budget-mib to pin it)", p.arenaNotPinned)
	}
	o := experts.DefaultFillOptions()
	o.Lock = !onGPU && pin
	if os.Getenv("STRATA_FILL_MAPPED") == "1" {
		o.Unbuffered = false // for start-up comparisons: copy through the page cache
	}
	a, st, err := experts.FillArena(ctx, src, ids, o, func(done, total int64) {
		report(Progress{Phase: "ram-copy", Done: done, Total: total})
	})
	if err != nil {
		return err
	}
	p.arena, p.fill = a, st
	// FindPack checks experts.bin against the model with ordinary reads, so with either
	// source neither file is mapped yet when unbuffered reads worked.
	p.fill.Unmapped = st.Unmapped && !f.Mapped()
	switch {
	case st.Fallback != "":
		p.note("the RAM arena was filled through the page cache: %s", st.Fallback)
	case !o.Unbuffered:
		p.note("the RAM arena was filled through the mapping (STRATA_FILL_MAPPED=1)")
	}
	if onGPU && pin {
		if err := dev.RegisterHost(a.Bytes()); err != nil {
			p.pins.give(want)
			p.note("the RAM arena is not page-locked (%v): the CPU computes its experts and the GPU cannot read them over PCIe", err)
			p.fill.Locked, p.fill.LockError = false, err.Error()
		} else {
			p.fill.Locked = true
		}
	} else if !onGPU && o.Lock && !st.Locked {
		p.pins.give(want)
		p.note("the RAM arena is not page-locked (%s): the OS may page it out", st.LockError)
	}
	if cfg.pcieShareGiven() && !p.fill.Locked {
		p.note("--pcie-frac %g has no effect: the GPU can only read page-locked memory", cfg.PCIeFrac)
	}
	return nil
}

// verifyChecksums records (and logs) checksums of the VRAM slots and the RAM arena.
func (p *placement) verifyChecksums() {
	if p.cache.Snapshot().Stats.DeviceSlots > 0 {
		if sum, err := p.cache.VRAMChecksum(); err != nil {
			p.note("verify: reading the VRAM slots back failed: %v", err)
		} else {
			p.verify = append(p.verify, "vram slots "+sum)
		}
	}
	if p.arena != nil {
		p.verify = append(p.verify, "ram arena "+p.arena.Checksum())
	}
	for _, v := range p.verify {
		slog.Warn("engine: verify: " + v)
	}
}

// GPULacks says what of the model the CUDA backend cannot run yet ("" when it runs it all,
// in every tier mode), for callers that choose a backend (the wizard).
func GPULacks(info ModelInfo) string { return gpuLacks(info) }

// gpuLacks says what of the model the CUDA backend cannot run yet ("" when it runs it all).
func gpuLacks(info ModelInfo) string {
	if info.RecurrentLayers > 0 {
		if why := gpu.DeltaNetLacks(info.DeltaKeyDim, info.ConvKernel); why != "" {
			return fmt.Sprintf("%s's Gated DeltaNet layers: %s (%s runs on the CPU)", info.Architecture, why, info.Architecture)
		}
	}
	return ""
}

// newBackend picks the backend: the CPU when asked or without a usable GPU; otherwise the
// GPU, with whole reporting whether the entire model fits there (with room for a KV cache
// and activations within the reserve and budget). --backend cuda without tier knobs insists
// on the whole model.
func newBackend(cfg Config, info ModelInfo) (b compute.Backend, whole bool, err error) {
	cpuBackend := func() compute.Backend {
		return cpu.New(cpu.Options{Threads: cfg.Threads, FloatPath: cfg.FloatPath})
	}
	mode := strings.ToLower(cfg.Backend)
	if mode == "cpu" || (mode == "auto" && cfg.FloatPath) {
		return cpuBackend(), true, nil
	}
	if cfg.FloatPath {
		return nil, false, errors.New("engine: --float-path is the CPU reference path; it cannot be combined with --backend cuda")
	}
	if why := gpuLacks(info); why != "" {
		if mode == "cuda" {
			return nil, false, fmt.Errorf("engine: --backend cuda: %s; use --backend cpu", why)
		}
		slog.Info("engine: using the CPU", "reason", why)
		return cpuBackend(), true, nil
	}
	dev := cfg.MainGPU
	if dev == Auto {
		dev = gpu.AutoDevice
	}
	g, err := gpu.New(gpu.Options{Device: dev, BudgetBytes: int64(cfg.VRAMBudgetMiB) << 20})
	if err != nil {
		if mode == "cuda" {
			return nil, false, fmt.Errorf("engine: --backend cuda: %w", err)
		}
		slog.Info("engine: using the CPU", "reason", err)
		return cpuBackend(), true, nil
	}
	if !gpu.HeadDimSupported(info.HeadDim) {
		g.Close()
		if mode == "cuda" {
			return nil, false, fmt.Errorf("engine: --backend cuda: the GPU attention kernels do not handle a head size of %d yet; use --backend cpu", info.HeadDim)
		}
		slog.Info("engine: using the CPU: no GPU attention kernel for this head size", "head_dim", info.HeadDim)
		return cpuBackend(), true, nil
	}
	need, room := wholeNeed(cfg, info, g.FreeBytes())
	if need > room {
		slog.Info("engine: the model does not fit in VRAM: tiering the experts", "need_mib", need>>20, "room_mib", room>>20)
	}
	return g, fitsWhole(cfg, info, g.FreeBytes()), nil
}

// wholeNeed is what putting the entire model on the GPU needs (the file, and a GiB for the
// KV cache and activations) and the room free VRAM gives it (less the reserve, within the
// budget).
func wholeNeed(cfg Config, info ModelInfo, free int64) (need, room int64) {
	need = info.FileBytes + 1<<30
	room = free - int64(cfg.VRAMReserveMiB)<<20
	if cfg.VRAMBudgetMiB > 0 {
		room = min(room, int64(cfg.VRAMBudgetMiB)<<20)
	}
	return need, room
}

// fitsWhole says whether a GPU start puts the entire model on the GPU rather than tiering
// its experts: it fits, and no tier knob asks for the tiers.
func fitsWhole(cfg Config, info ModelInfo, free int64) bool {
	need, room := wholeNeed(cfg, info, free)
	return need <= room && !tierKnobsSet(cfg)
}
