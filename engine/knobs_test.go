package engine

import (
	"errors"
	"testing"
)

// TestCheckIsWhatOpenRefuses: Check passes the defaults, and refuses what Validate refuses
// and helper-GPU slots while the engine does not open helper GPUs, by flag.
func TestCheckIsWhatOpenRefuses(t *testing.T) {
	if err := DefaultConfig().Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := DefaultConfig()
	bad.Threads = -1
	var ce *ConfigError
	if err := bad.Check(); !errors.As(err, &ce) || ce.Flag != "threads" {
		t.Errorf("negative threads: %v, want a --threads error", err)
	}
	helper := DefaultConfig()
	helper.ExpertCacheDevice1 = 3
	err := helper.Check()
	if HelperGPUsOpen {
		if err != nil {
			t.Errorf("helper slots refused while helper GPUs open: %v", err)
		}
		return
	}
	if !errors.As(err, &ce) || ce.Flag != "expert-cache-device1/2" || !ce.NotBuilt {
		t.Errorf("helper slots: %v, want a not-built --expert-cache-device1/2 refusal", err)
	}
}
