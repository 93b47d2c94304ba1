package engine

import (
	"errors"
	"fmt"
	"strings"
)

// Auto marks a numeric knob the engine sizes itself (expert cache slots, prefill batch).
const Auto = -1

// AutoAdaptEvery is what AdaptEvery Auto means for a GPU's expert cache: a pass of adaptive
// swaps every 32 tokens. The cache only swaps an expert in that is clearly hotter than the
// one it replaces (experts/adapt.go), so passes that find nothing cost a sort per layer.
// Without them a first run, before any saved profile, keeps the plan's neutral order: on
// the H200, q30 tiered at 9700 MiB decoded at 81 tok/s with them off and 115 with them on,
// in one call (cuda/BENCH.md, 2026-12-02, session 18).
const AutoAdaptEvery = 32

// Config holds every knob of DESIGN.md. CLI flags, the wizard and the settings panel all map
// onto these fields; the zero values that mean "decide for me" are documented per field.
type Config struct {
	Backend string // "auto" (CUDA when a usable GPU is found, else CPU), "cpu", "cuda"
	Threads int    // CPU worker goroutines; 0 = one per logical CPU (GOMAXPROCS: parallel.NewPool)

	MaxContext int    // tokens of KV cache; 0 = the model's context length capped by memory
	KVType     string // "f16" or "int8"
	Prefill    int    // tokens per prefill step; Auto = chosen by the engine

	ExpertCache        int // VRAM expert slots on the main GPU; Auto = as many as fit
	ExpertCacheDevice1 int // slots on helper GPU 1 (0 = unused)
	ExpertCacheDevice2 int // slots on helper GPU 2 (0 = unused)
	// MainGPU is the card that runs the model: Auto = the one with the most free VRAM;
	// N = CUDA device N (CUDA orders cards fastest first; set CUDA_DEVICE_ORDER=PCI_BUS_ID
	// for the order `strata hw` lists them in). The other cards are the helpers, the one
	// with the most free VRAM first.
	MainGPU           int
	VRAMReserveMiB    int     // VRAM left free for the desktop and other apps
	VRAMBudgetMiB     int     // cap on what Strata takes of a card; 0 = no cap
	TieredExperts     bool    // VRAM, then pinned RAM, then cold on the SSD
	HostBudgetGiB     float64 // pinned tier size; 0 = auto (available RAM - HostReserveGiB); > 0 on a GPU pins as TieredExperts does
	HostReserveGiB    float64 // RAM kept free for the rest of the PC
	ResidentExperts   bool    // copy the complement of the GPU cache into one RAM arena
	ResidentBudgetGiB float64 // cap on that arena; 0 = no cap
	AdaptEvery        int     // tokens between adaptive cache swaps; 0 = off; Auto = AutoAdaptEvery when the experts are tiered on a GPU
	PCIeFrac          float64 // share of pinned misses the GPU reads over PCIe instead of the CPU; Auto (the default) = tuned on the decode steps' times where the GPU can read the pinned tier
	Spec              int     // tokens drafted per step by multi-token prediction; 0 = off
	SpecMinP          float64 // minimum draft probability to keep drafting
	Verify            bool    // print checksums of filled VRAM slots and the RAM arena
	// PinnedBudgetMiB caps the page-locked host memory Open allocates (the pinned expert
	// tier, the GPU's staging buffers); what does not fit falls back with a log line. 0 =
	// the driver's budget under WSL2 (about 1 GiB for the whole VM), no cap elsewhere.
	PinnedBudgetMiB int

	// LearnProfile adds the routing counts of a tiered run to the model's expert profile
	// when the model is closed, so the next start places the experts the user routes to.
	// Benchmarks switch it off to keep their runs comparable.
	LearnProfile bool

	// FloatPath makes the CPU backend dequantise weights and compute in float32 instead of
	// quantising activations to 8 bits. Slower; it is the reference path for tests.
	FloatPath bool
}

// pcieShareGiven says whether the user fixed a share of pinned misses for the GPU to read
// over PCIe. Auto, the default, tunes the share wherever the GPU can read the pinned tier
// and turns nothing on by itself.
func (c Config) pcieShareGiven() bool { return c.PCIeFrac > 0 }

// DefaultConfig is what a user gets without touching anything.
func DefaultConfig() Config {
	return Config{
		Backend:        "auto",
		KVType:         "f16",
		Prefill:        Auto,
		ExpertCache:    Auto,
		MainGPU:        Auto,
		VRAMReserveMiB: 1024,
		HostReserveGiB: 8,
		SpecMinP:       0.75,
		AdaptEvery:     Auto,
		PCIeFrac:       Auto,
		LearnProfile:   true,
	}
}

// ConfigError is a knob (named by its flag) whose value the engine cannot honour: a value no
// engine could (Validate) or a feature this build does not have yet (NotBuilt).
type ConfigError struct {
	Flag     string // without the dashes, e.g. "kv"
	Msg      string
	NotBuilt bool
}

func (e *ConfigError) Error() string { return "--" + e.Flag + ": " + e.Msg }

// Validate rejects values no engine could honour, naming the knob by its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, &ConfigError{Flag: flag, Msg: fmt.Sprintf(format, args...)})
	}
	switch strings.ToLower(c.Backend) {
	case "", "auto", "cpu", "cuda":
	default:
		bad("backend", "%q is not one of auto, cpu, cuda", c.Backend)
	}
	switch strings.ToLower(c.KVType) {
	case "", "f16", "int8":
	default:
		bad("kv", "%q is not one of f16, int8", c.KVType)
	}
	if c.Threads < 0 {
		bad("threads", "%d is negative", c.Threads)
	}
	if c.MaxContext < 0 {
		bad("max-context", "%d is negative", c.MaxContext)
	}
	if c.Prefill < Auto || c.Prefill == 0 {
		bad("prefill", "%d: give a positive batch size or auto", c.Prefill)
	}
	if c.ExpertCache < Auto {
		bad("expert-cache", "%d: give a slot count or auto", c.ExpertCache)
	}
	if c.MainGPU < Auto {
		bad("main-gpu", "%d: give a GPU index or auto", c.MainGPU)
	}
	if c.ExpertCacheDevice1 < 0 || c.ExpertCacheDevice2 < 0 {
		bad("expert-cache-device1/2", "slot counts cannot be negative")
	}
	if c.VRAMReserveMiB < 0 {
		bad("vram-reserve-mib", "%d is negative", c.VRAMReserveMiB)
	}
	if c.VRAMBudgetMiB < 0 {
		bad("vram-budget-mib", "%d is negative", c.VRAMBudgetMiB)
	}
	if c.HostBudgetGiB < 0 {
		bad("host-budget-gib", "%g is negative", c.HostBudgetGiB)
	}
	if c.HostReserveGiB < 0 {
		bad("host-reserve-gib", "%g is negative", c.HostReserveGiB)
	}
	if c.PinnedBudgetMiB < 0 {
		bad("pinned-budget-mib", "%d is negative", c.PinnedBudgetMiB)
	}
	if c.ResidentBudgetGiB < 0 {
		bad("resident-budget-gib", "%g is negative", c.ResidentBudgetGiB)
	}
	if c.TieredExperts && c.ResidentExperts {
		bad("tiered-experts", "cannot be combined with --resident-experts; pick one")
	}
	if c.AdaptEvery < Auto {
		bad("adapt-every", "%d is negative", c.AdaptEvery)
	}
	if c.PCIeFrac != Auto && (c.PCIeFrac < 0 || c.PCIeFrac > 1) {
		bad("pcie-frac", "%g is outside [0, 1] (or auto)", c.PCIeFrac)
	}
	if c.Spec < 0 {
		bad("spec", "%d is negative", c.Spec)
	}
	if c.SpecMinP < 0 || c.SpecMinP > 1 {
		bad("spec-min-p", "%g is outside [0, 1]", c.SpecMinP)
	}
	return errors.Join(errs...)
}
