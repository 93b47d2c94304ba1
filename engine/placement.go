package engine

import (
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
	cache   *experts.Cache  // nil unless the experts are tiered
	net     *model.Model

	layout   *experts.Layout // the experts in the GGUF
	pack     *experts.Layout // experts.bin next to the model, when it matches
	arena    *experts.Arena  // the pinned / resident experts
	prefetch *experts.Prefetcher
	cold     *experts.ColdReader // batches' cold experts, around the page cache (tiered)
	fill     experts.FillStats
	notes    []string  // what the tiers could not do as planned (shown in the tier map)
	pins     pinBudget // page-locked host memory counted against --pinned-budget-mib / WSL2
	// arenaNotPinned says why the pinned expert tier stayed in plain RAM ("" when it did not).
	arenaNotPinned string
	verify         []string // checksums for --verify
	warm           *warmer  // maps the file's pages after a CPU load; nil when not worth it
}

func (p *placement) close() error {
	var errs []error
	if p.warm != nil {
		p.warm.stop() // before anything unmaps the file
	}
	if p.backend != nil {
		errs = append(errs, p.backend.Close()) // unregisters the arena before it is freed
	}
	if p.host != nil {
		errs = append(errs, p.host.Close())
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
	return (cfg.ExpertCache != Auto) || cfg.TieredExperts || cfg.ResidentExperts || cfg.PCIeFrac > 0 || cfg.AdaptEvery > 0
}

// place opens the backend(s) and loads the weights: everything on the CPU; everything on
// one GPU when it fits (or --backend cuda without tier knobs); or, when the model is larger
// than the GPU or the tier knobs ask for it, the experts tiered across a VRAM cache, host
// memory and the file by the plan. Without a GPU, --resident-experts still reads the experts
// into a page-locked RAM arena for the CPU. f may be unmapped (gguf.OpenUnmapped): place
// maps it before anything reads through the mapping, after the arena fill when there is one.
func place(ctx context.Context, f *gguf.File, cfg Config, info ModelInfo, report func(Progress)) (*placement, error) {
	// The order matters under WSL2, where the driver pins or maps about 1 GiB of host memory
	// for the whole VM: the GPU context is created here, first, before any weight, staging
	// buffer, arena registration or file mapping is allocated (Open has only read the
	// header), so the context's own pinned memory is never the allocation that fails.
	b, whole, err := newBackend(cfg, info)
	if err != nil {
		return nil, err
	}
	g, isGPU := b.(*gpu.Backend)
	p := &placement{backend: b, pins: newPinBudget(cfg, platform.DetectWSL(), isGPU)}
	if p.pins.capped() {
		slog.Info("engine: pinned host memory is capped", "budget", p.pins.String())
	}
	if isGPU && !p.pins.take(stepInputPinBytes) {
		err = p.pins.tooSmall("the GPU backend's step inputs", stepInputPinBytes)
		p.close()
		return nil, err
	}
	switch {
	case isGPU && !whole:
		err = p.tiered(ctx, f, cfg, info, g, g.FreeBytes(), nil, report)
	case !isGPU && cfg.ResidentExperts:
		c := b.(*cpu.Backend)
		err = p.tiered(ctx, f, cfg, info, experts.HostDevice{Backend: c}, 0, nil, report)
	default:
		if !isGPU && cfg.ExpertCache > 0 {
			err = fmt.Errorf("engine: --expert-cache %d asks for VRAM slots, but the model runs on the CPU (%s); use --expert-cache auto", cfg.ExpertCache, b.Name())
			break
		}
		if !isGPU && (cfg.TieredExperts || cfg.PCIeFrac > 0 || cfg.AdaptEvery > 0) {
			slog.Warn("engine: the model runs on the CPU: the expert tier knobs (--tiered-experts, --pcie-frac, --adapt-every) change nothing")
		}
		if err = mapModel(f, "", report); err != nil {
			break
		}
		p.net, err = model.Load(f, b, func(done, total int64) {
			report(Progress{Phase: "weights", Done: done, Total: total})
		})
		if err == nil && !isGPU && warmFits(f.TotalSize(), platform.ProbeMemory(ctx).AvailableBytes) {
			parts := make([][]byte, f.PartCount())
			for i := range parts {
				parts[i] = f.Part(i).Mapping()
			}
			p.warm = startWarm(parts, os.Getpagesize(), f.Path)
		}
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// tiered plans the experts' tiers, reads the pinned ones into the RAM arena, and loads the
// model through the expert cache on dev (the GPU, or the CPU standing in for it), with the
// helper tier on helpers (helper GPU 1, 2: --expert-cache-device1/2; Open opens none yet,
// tests pass CPU stand-ins).
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
	for h, n := range in.HelperSlots {
		if n == 0 {
			continue
		}
		if h >= len(helpers) {
			return fmt.Errorf("engine: --expert-cache-device%d %d: helper GPU %d is not open (%d helpers)", h+1, n, h+1, len(helpers))
		}
		if fb, ok := helpers[h].(interface{ FreeBytes() int64 }); ok {
			in.HelperFreeBytes[h] = fb.FreeBytes()
		}
	}
	ring := 0
	if onGPU {
		// The streaming ring (one layer's experts) comes out of the activations' share.
		ring = streamRingSlots(s)
		in.ActivationBytes += int64(ring) * s.BlobBytes()
	}
	plan, err := experts.MakePlan(in)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
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
		bufs, size, fallback, err := stagingFor(&p.pins)
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
		PCIeFrac: cfg.PCIeFrac, AdaptEvery: cfg.AdaptEvery,
		StreamSlots: ring, StreamMinTokens: streamMinTokens,
		Helpers: helpers, HelperOf: plan.HelperOf(),
	}
	if len(pinned) > 0 {
		if err := p.fillArena(ctx, f, cfg, dev, onGPU, pinned, report); err != nil {
			return err
		}
		cc.Pinned, cc.PinnedMapped = p.arena, onGPU && p.fill.Locked
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
	if cfg.PCIeFrac > 0 && !p.fill.Locked {
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
		return fmt.Sprintf("the CUDA backend has no Gated DeltaNet kernels (conv, delta rule, gated norm) yet (%s runs on the CPU)", info.Architecture)
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
	need := info.FileBytes + 1<<30
	room := g.FreeBytes() - int64(cfg.VRAMReserveMiB)<<20
	if cfg.VRAMBudgetMiB > 0 {
		room = min(room, int64(cfg.VRAMBudgetMiB)<<20)
	}
	fits := need <= room
	if !fits {
		slog.Info("engine: the model does not fit in VRAM: tiering the experts", "need_mib", need>>20, "room_mib", room>>20)
	}
	return g, fits && !tierKnobsSet(cfg), nil
}
