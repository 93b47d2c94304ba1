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

// TestAdaptEvery: Auto (the default) swaps every AutoAdaptEvery tokens on a GPU and never
// without one; a number the user gives, 0 included, is kept; below Auto is refused.
func TestAdaptEvery(t *testing.T) {
	for _, tc := range []struct {
		knob  int
		onGPU bool
		want  int
	}{
		{Auto, true, AutoAdaptEvery},
		{Auto, false, 0},
		{0, true, 0},
		{8, true, 8},
		{8, false, 8},
	} {
		c := DefaultConfig()
		c.AdaptEvery = tc.knob
		if err := c.Check(); err != nil {
			t.Errorf("--adapt-every %d refused: %v", tc.knob, err)
		}
		if got := adaptEvery(c, tc.onGPU); got != tc.want {
			t.Errorf("adaptEvery(%d, on GPU %v) = %d, want %d", tc.knob, tc.onGPU, got, tc.want)
		}
	}
	if DefaultConfig().AdaptEvery != Auto {
		t.Errorf("default --adapt-every %d, want auto", DefaultConfig().AdaptEvery)
	}
	bad := DefaultConfig()
	bad.AdaptEvery = Auto - 1
	var ce *ConfigError
	if err := bad.Check(); !errors.As(err, &ce) || ce.Flag != "adapt-every" {
		t.Errorf("--adapt-every %d: %v, want an --adapt-every error", bad.AdaptEvery, err)
	}
}
