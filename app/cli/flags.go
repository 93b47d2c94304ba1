package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"strata/engine"
)

// autoNum is a numeric flag that also accepts "auto" (engine.Auto), parsed by parse.
type autoNum[T int | float64] struct {
	v     *T
	parse func(string) (T, error)
}

func autoInt(v *int) autoNum[int] { return autoNum[int]{v, strconv.Atoi} }

func autoFloat(v *float64) autoNum[float64] {
	return autoNum[float64]{v, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }}
}

func (a autoNum[T]) String() string {
	if a.v == nil {
		return ""
	}
	if *a.v == engine.Auto {
		return "auto"
	}
	return fmt.Sprint(*a.v)
}

func (a autoNum[T]) Set(s string) error {
	if strings.EqualFold(s, "auto") {
		*a.v = engine.Auto
		return nil
	}
	n, err := a.parse(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a non-negative number or auto, got %q", s)
	}
	*a.v = n
	return nil
}

// addEngineFlags binds every engine knob (DESIGN.md, Knobs) to cfg.
func addEngineFlags(fs *flag.FlagSet, cfg *engine.Config) {
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "compute backend: auto, cpu or cuda")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "CPU worker threads (0 = one per logical CPU)")
	fs.IntVar(&cfg.MaxContext, "max-context", cfg.MaxContext, "context length in tokens (0 = the model's, capped by memory)")
	fs.StringVar(&cfg.KVType, "kv", cfg.KVType, "KV cache type: f16 or int8")
	fs.Var(autoInt(&cfg.Prefill), "prefill", "prompt tokens per prefill step, or auto")
	fs.Var(autoInt(&cfg.ExpertCache), "expert-cache", "VRAM expert slots on the main GPU, or auto")
	fs.Var(autoInt(&cfg.MainGPU), "main-gpu", "the GPU that runs the model (CUDA index), or auto: the one with the most free VRAM")
	fs.IntVar(&cfg.ExpertCacheDevice1, "expert-cache-device1", cfg.ExpertCacheDevice1, "expert slots on helper GPU 1")
	fs.IntVar(&cfg.ExpertCacheDevice2, "expert-cache-device2", cfg.ExpertCacheDevice2, "expert slots on helper GPU 2")
	fs.IntVar(&cfg.VRAMReserveMiB, "vram-reserve-mib", cfg.VRAMReserveMiB, "VRAM left free for other apps (MiB)")
	fs.IntVar(&cfg.VRAMBudgetMiB, "vram-budget-mib", cfg.VRAMBudgetMiB, "cap on the VRAM Strata takes of a card (MiB, 0 = no cap)")
	fs.BoolVar(&cfg.TieredExperts, "tiered-experts", cfg.TieredExperts, "VRAM, then pinned RAM, then SSD tiers for experts")
	fs.Float64Var(&cfg.HostBudgetGiB, "host-budget-gib", cfg.HostBudgetGiB, "pinned RAM tier size (GiB, 0 = auto); given on a GPU, it turns the pinned tier on as --tiered-experts does")
	fs.Float64Var(&cfg.HostReserveGiB, "host-reserve-gib", cfg.HostReserveGiB, "RAM kept free for the rest of the PC (GiB)")
	fs.IntVar(&cfg.PinnedBudgetMiB, "pinned-budget-mib", cfg.PinnedBudgetMiB, "cap on page-locked host memory (MiB, 0 = about 1 GiB under WSL2, no cap elsewhere)")
	fs.BoolVar(&cfg.ResidentExperts, "resident-experts", cfg.ResidentExperts, "copy the experts the GPU does not hold into RAM")
	fs.Float64Var(&cfg.ResidentBudgetGiB, "resident-budget-gib", cfg.ResidentBudgetGiB, "cap on the resident RAM arena (GiB, 0 = none)")
	fs.Var(autoInt(&cfg.AdaptEvery), "adapt-every", fmt.Sprintf("tokens between adaptive expert swaps (0 = off), or auto: every %d with experts tiered on a GPU", engine.AutoAdaptEvery))
	fs.Var(autoFloat(&cfg.PCIeFrac), "pcie-frac", "share of the pinned misses the GPU reads over PCIe (0 to 1; a share above 0 turns the pinned tier on), or auto: tuned on the decode steps' times where there is a pinned tier")
	fs.IntVar(&cfg.Spec, "spec", cfg.Spec, "tokens drafted per step by multi-token prediction (0 = off)")
	fs.Float64Var(&cfg.SpecMinP, "spec-min-p", cfg.SpecMinP, "minimum draft probability")
	fs.BoolVar(&cfg.Verify, "verify", cfg.Verify, "print checksums of the filled expert tiers")
	fs.BoolVar(&cfg.FloatPath, "float-path", cfg.FloatPath, "compute in float32 from dequantised weights (reference, slow)")
}
