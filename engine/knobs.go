package engine

import (
	"errors"
	"fmt"
)

// refuseUnbuilt names every knob this build cannot honour yet, so no flag is silently ignored.
// The expert tiers (split placement across VRAM, RAM and SSD) are not built: until they are,
// their knobs are refused, not dropped.
func refuseUnbuilt(cfg Config) error {
	var errs []error
	no := func(flag, why string) { errs = append(errs, fmt.Errorf("--%s: %s", flag, why)) }
	const tiers = "the expert tiers are not in this build yet: a model runs wholly on the CPU or wholly on one GPU"
	if cfg.ExpertCache != Auto && cfg.ExpertCache != 0 {
		no("expert-cache", tiers)
	}
	if cfg.ExpertCacheDevice1 != 0 || cfg.ExpertCacheDevice2 != 0 {
		no("expert-cache-device1/2", tiers)
	}
	if cfg.TieredExperts {
		no("tiered-experts", tiers)
	}
	if cfg.ResidentExperts {
		no("resident-experts", tiers)
	}
	if cfg.HostBudgetGiB != 0 {
		no("host-budget-gib", tiers)
	}
	if cfg.ResidentBudgetGiB != 0 {
		no("resident-budget-gib", tiers)
	}
	if cfg.AdaptEvery != 0 {
		no("adapt-every", tiers)
	}
	if cfg.PCIeFrac != 0 {
		no("pcie-frac", tiers)
	}
	if cfg.Spec != 0 {
		no("spec", "multi-token-prediction drafting is not built yet")
	}
	if cfg.KVType == "int8" {
		no("kv", "the int8 KV cache is not built yet; use f16")
	}
	if cfg.Verify {
		no("verify", tiers)
	}
	return errors.Join(errs...)
}
