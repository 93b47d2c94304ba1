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

// TestPCIeFracAuto: --pcie-frac is auto by default (the cache tunes the share where the GPU
// can read the pinned tier), and auto turns nothing on by itself: no pinned tier, no tier
// knob. A share above 0 pins as --tiered-experts does; values outside [0, 1] are refused.
func TestPCIeFracAuto(t *testing.T) {
	c := DefaultConfig()
	if c.PCIeFrac != Auto {
		t.Errorf("default --pcie-frac %g, want auto", c.PCIeFrac)
	}
	if err := c.Check(); err != nil {
		t.Errorf("--pcie-frac auto refused: %v", err)
	}
	if c.pcieShareGiven() || pinsImplicitly(c, true) || tierKnobsSet(c) {
		t.Errorf("--pcie-frac auto: share given %v, pins %v, tier knob %v", c.pcieShareGiven(), pinsImplicitly(c, true), tierKnobsSet(c))
	}
	c.PCIeFrac = 0.3
	if !c.pcieShareGiven() || !pinsImplicitly(c, true) || !tierKnobsSet(c) || pinsImplicitly(c, false) {
		t.Errorf("--pcie-frac 0.3: share given %v, pins %v (without a GPU %v), tier knob %v", c.pcieShareGiven(), pinsImplicitly(c, true), pinsImplicitly(c, false), tierKnobsSet(c))
	}
	for _, v := range []float64{-0.5, Auto - 1, 1.5} {
		c.PCIeFrac = v
		var ce *ConfigError
		if err := c.Check(); !errors.As(err, &ce) || ce.Flag != "pcie-frac" {
			t.Errorf("--pcie-frac %g: %v, want a --pcie-frac error", v, err)
		}
	}
}
