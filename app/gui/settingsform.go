package gui

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"strata/engine"
)

// Modes the settings panel offers; each is a preset of a few engine.Config fields.
const (
	ModeAuto     = "auto"     // the engine decides (GPU cache when there is a GPU)
	ModeTiered   = "tiered"   // VRAM, then pinned RAM, then SSD
	ModeResident = "resident" // VRAM cache plus one RAM arena for the rest
	ModeCPU      = "cpu"      // everything on the CPU
)

func modeNames() []string { return []string{ModeAuto, ModeTiered, ModeResident, ModeCPU} }

// modeOf names the mode a configuration is in.
func modeOf(c engine.Config) string {
	switch {
	case strings.EqualFold(c.Backend, "cpu"):
		return ModeCPU
	case c.TieredExperts:
		return ModeTiered
	case c.ResidentExperts:
		return ModeResident
	}
	return ModeAuto
}

// settingsForm is the settings panel's state as the widgets hold it (text and switches).
type settingsForm struct {
	Mode           string
	ExpertCache    string // "auto" or a slot count
	Helper1        bool
	Helper1Slots   string
	Helper2        bool
	Helper2Slots   string
	VRAMReserveMiB string
	VRAMBudgetMiB  string
	HostReserveGiB string
	HostBudgetGiB  string // 0 = auto
	MaxContext     string // 0 = the model's
	KVType         string
	Threads        string // 0 = one per logical CPU
	Spec           string // 0 = off
	AdaptiveSwaps  bool
	AdaptEvery     string
}

// formOf fills the panel from a configuration.
func formOf(c engine.Config) settingsForm {
	itoa := strconv.Itoa
	ftoa := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	cache := "auto"
	if c.ExpertCache != engine.Auto {
		cache = itoa(c.ExpertCache)
	}
	adapt := "auto"
	if c.AdaptEvery > 0 {
		adapt = itoa(c.AdaptEvery)
	}
	kv := c.KVType
	if kv == "" {
		kv = "f16"
	}
	return settingsForm{
		Mode:           modeOf(c),
		ExpertCache:    cache,
		Helper1:        c.ExpertCacheDevice1 > 0,
		Helper1Slots:   itoa(c.ExpertCacheDevice1),
		Helper2:        c.ExpertCacheDevice2 > 0,
		Helper2Slots:   itoa(c.ExpertCacheDevice2),
		VRAMReserveMiB: itoa(c.VRAMReserveMiB),
		VRAMBudgetMiB:  itoa(c.VRAMBudgetMiB),
		HostReserveGiB: ftoa(c.HostReserveGiB),
		HostBudgetGiB:  ftoa(c.HostBudgetGiB),
		MaxContext:     itoa(c.MaxContext),
		KVType:         kv,
		Threads:        itoa(c.Threads),
		Spec:           itoa(c.Spec),
		AdaptiveSwaps:  c.AdaptEvery != 0,
		AdaptEvery:     adapt,
	}
}

// config applies the form to base (fields the panel does not show are kept) and validates
// the result. Every problem is listed, each naming the field as the panel labels it.
func (f settingsForm) config(base engine.Config) (engine.Config, error) {
	c := base
	var errs []error
	integer := func(label, v string, dst *int) {
		x, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || x < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a whole number of 0 or more", label, v))
			return
		}
		*dst = x
	}
	float := func(label, v string, dst *float64) {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || x < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a number of 0 or more", label, v))
			return
		}
		*dst = x
	}
	switch f.Mode {
	case ModeAuto:
		c.Backend, c.TieredExperts, c.ResidentExperts = "auto", false, false
	case ModeTiered:
		c.Backend, c.TieredExperts, c.ResidentExperts = "auto", true, false
	case ModeResident:
		c.Backend, c.TieredExperts, c.ResidentExperts = "auto", false, true
	case ModeCPU:
		c.Backend, c.TieredExperts, c.ResidentExperts = "cpu", false, false
	default:
		errs = append(errs, fmt.Errorf("mode: %q is not one of %s", f.Mode, strings.Join(modeNames(), ", ")))
	}
	if strings.EqualFold(strings.TrimSpace(f.ExpertCache), "auto") {
		c.ExpertCache = engine.Auto
	} else {
		integer("GPU expert slots", f.ExpertCache, &c.ExpertCache)
	}
	c.ExpertCacheDevice1, c.ExpertCacheDevice2 = 0, 0
	if f.Helper1 {
		integer("helper GPU 1 slots", f.Helper1Slots, &c.ExpertCacheDevice1)
	}
	if f.Helper2 {
		integer("helper GPU 2 slots", f.Helper2Slots, &c.ExpertCacheDevice2)
	}
	integer("VRAM reserve (MiB)", f.VRAMReserveMiB, &c.VRAMReserveMiB)
	integer("VRAM budget (MiB)", f.VRAMBudgetMiB, &c.VRAMBudgetMiB)
	float("RAM reserve (GiB)", f.HostReserveGiB, &c.HostReserveGiB)
	float("RAM budget (GiB)", f.HostBudgetGiB, &c.HostBudgetGiB)
	integer("context length", f.MaxContext, &c.MaxContext)
	if c.MaxContext > 0 && c.MaxContext < 256 {
		errs = append(errs, fmt.Errorf("context length: %d tokens is too short for a chat; use 0 (the model's) or at least 256", c.MaxContext))
	}
	c.KVType = f.KVType
	integer("threads", f.Threads, &c.Threads)
	integer("speculative tokens", f.Spec, &c.Spec)
	c.AdaptEvery = 0
	switch {
	case !f.AdaptiveSwaps:
	case strings.EqualFold(strings.TrimSpace(f.AdaptEvery), "auto"):
		c.AdaptEvery = engine.Auto
	default:
		integer("swap every (tokens)", f.AdaptEvery, &c.AdaptEvery)
		if c.AdaptEvery == 0 {
			errs = append(errs, errors.New("swap every (tokens): give a number above 0 or auto, or turn adaptive swaps off"))
		}
	}
	if c.Backend == "cpu" && (c.ExpertCacheDevice1 > 0 || c.ExpertCacheDevice2 > 0) {
		errs = append(errs, errors.New("helper GPU slots: the CPU mode uses no GPU, so it has no helper GPUs; switch the helpers off or pick another mode"))
	}
	if len(errs) == 0 {
		// Open's own knob check: the panel never saves what Open would refuse for its knobs.
		if err := c.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// defaultConfig is what "Defaults" in the settings panel restores.
func defaultConfig() engine.Config { return engine.DefaultConfig() }
