package engine

import "errors"

// Check is what Open checks of cfg before it reads the model: Validate, then the knobs this
// build cannot honour yet. A Config that passes it is not refused for its knobs.
func (c Config) Check() error {
	if err := c.Validate(); err != nil {
		return err
	}
	return refuseUnbuilt(c)
}

// refuseUnbuilt names every knob this build cannot honour yet, so no flag is silently ignored.
func refuseUnbuilt(cfg Config) error {
	var errs []error
	no := func(flag, why string) { errs = append(errs, &ConfigError{Flag: flag, Msg: why, NotBuilt: true}) }
	if cfg.Spec != 0 {
		no("spec", "multi-token-prediction drafting is not built yet")
	}
	return errors.Join(errs...)
}

// GPUInt8KV tells whether the GPU backend runs --kv int8 (its kernels read an int8 cache in
// place), so the plan offers int8 there too and the wizard may pick it.
const GPUInt8KV = true
