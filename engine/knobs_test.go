package engine

import (
	"errors"
	"testing"
)

// TestCheckIsWhatOpenRefuses: Check passes the defaults and helper-GPU slots, and refuses
// what Validate refuses, by flag.
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
	helper.ExpertCacheDevice1, helper.ExpertCacheDevice2 = 3, 2
	if err := helper.Check(); err != nil {
		t.Errorf("helper slots refused: %v", err)
	}
	helper.ExpertCacheDevice2 = -1
	if err := helper.Check(); !errors.As(err, &ce) || ce.Flag != "expert-cache-device1/2" {
		t.Errorf("negative helper slots: %v, want an --expert-cache-device1/2 error", err)
	}
}
