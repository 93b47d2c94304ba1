package engine

import "errors"

// refuseUnbuilt names every knob this build cannot honour yet, so no flag is silently ignored.
func refuseUnbuilt(cfg Config) error {
	var errs []error
	no := func(flag, why string) { errs = append(errs, &ConfigError{Flag: flag, Msg: why, NotBuilt: true}) }
	if cfg.ExpertCacheDevice1 != 0 || cfg.ExpertCacheDevice2 != 0 {
		no("expert-cache-device1/2", "the engine does not open helper GPUs yet (strata plan shows where their experts would go); leave them at 0")
	}
	if cfg.Spec != 0 {
		no("spec", "multi-token-prediction drafting is not built yet")
	}
	return errors.Join(errs...)
}

// int8KVOnGPU refuses --kv int8 where the GPU would hold the cache: its kernels read f16.
func int8KVOnGPU() error {
	return &ConfigError{Flag: "kv", Msg: "the int8 KV cache is built for the CPU backend only (--backend cpu); the GPU backend keeps f16", NotBuilt: true}
}
