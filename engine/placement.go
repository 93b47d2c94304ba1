package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	host    *cpu.Backend    // the CPU pool for expert misses (tiers only)
	cache   *experts.Cache  // nil unless the experts are tiered
	plan    experts.Plan    // the tier plan (tiers only)
	net     *model.Model
}

func (p *placement) close() error {
	var errs []error
	if p.backend != nil {
		errs = append(errs, p.backend.Close())
	}
	if p.host != nil {
		errs = append(errs, p.host.Close())
	}
	return errors.Join(errs...)
}

// tierKnobsSet says whether the user asked for the expert tiers explicitly.
func tierKnobsSet(cfg Config) bool {
	return (cfg.ExpertCache != Auto) || cfg.TieredExperts || cfg.ResidentExperts || cfg.PCIeFrac > 0 || cfg.AdaptEvery > 0
}

// place opens the backend(s) and loads the weights: everything on the CPU; everything on
// one GPU when it fits (or --backend cuda without tier knobs); or, when the model is larger
// than the GPU or the tier knobs ask for it, the experts tiered across a VRAM cache, host
// memory and the file by the plan.
func place(ctx context.Context, f *gguf.File, cfg Config, info ModelInfo, report func(Progress)) (*placement, error) {
	b, whole, err := newBackend(cfg, info)
	if err != nil {
		return nil, err
	}
	g, isGPU := b.(*gpu.Backend)
	if !isGPU || whole {
		if !isGPU && cfg.ExpertCache > 0 {
			b.Close()
			return nil, fmt.Errorf("engine: --expert-cache %d asks for VRAM slots, but the model runs on the CPU (%s); use --expert-cache auto", cfg.ExpertCache, b.Name())
		}
		if !isGPU && tierKnobsSet(cfg) {
			slog.Warn("engine: the model runs on the CPU: the expert tier knobs (--tiered-experts, --resident-experts, --pcie-frac, --adapt-every) change nothing")
		}
		net, err := model.Load(f, b, func(done, total int64) {
			report(Progress{Phase: "weights", Done: done, Total: total})
		})
		if err != nil {
			b.Close()
			return nil, err
		}
		return &placement{backend: b, net: net}, nil
	}
	p := &placement{backend: g}
	if err := p.tiered(ctx, f, cfg, info, g, report); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// tiered plans the experts' tiers on g and loads the model through the expert cache.
func (p *placement) tiered(ctx context.Context, f *gguf.File, cfg Config, info ModelInfo, g *gpu.Backend, report func(Progress)) error {
	s, err := expertShape(f, info)
	if err != nil {
		return err
	}
	var rank []experts.ID
	if prof, _ := loadProfile(f, s); prof != nil {
		rank = prof.Rank()
	}
	if cfg.PCIeFrac > 0 && !cfg.TieredExperts && !cfg.ResidentExperts {
		// The GPU reads misses over PCIe from pinned host memory: pin the experts the cache
		// does not hold, as the tiered mode does.
		slog.Info("engine: --pcie-frac pins the experts outside VRAM (the tiered mode's pinned tier)")
		cfg.TieredExperts = true
	}
	in := planInput(info, s, g.FreeBytes(), platform.ProbeMemory(ctx).AvailableBytes, cfg, rank)
	// The streaming ring (one layer's experts) comes out of the activations' share.
	ring := streamRingSlots(s)
	in.ActivationBytes += int64(ring) * s.BlobBytes()
	plan, err := experts.MakePlan(in)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	for _, n := range plan.Notes {
		slog.Info("engine: plan", "note", n)
	}
	p.plan = plan
	p.host = cpu.New(cpu.Options{Threads: cfg.Threads})
	p.cache, err = experts.NewCache(g, p.host, experts.CacheConfig{
		Shape: s, Tier: plan.Tier, Rank: plan.Rank,
		PCIeFrac: cfg.PCIeFrac, AdaptEvery: cfg.AdaptEvery,
		StreamSlots: ring, StreamMinTokens: streamMinTokens,
	})
	if err != nil {
		return err
	}
	p.net, err = model.LoadWith(f, g, func(done, total int64) {
		report(Progress{Phase: "weights", Done: done, Total: total})
	}, p.cache.Layer)
	if err != nil {
		return err
	}
	return p.cache.Fill(ctx, func(done, total int64) {
		report(Progress{Phase: "vram-fill", Done: done, Total: total})
	})
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
	g, err := gpu.New(gpu.Options{BudgetBytes: int64(cfg.VRAMBudgetMiB) << 20})
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
