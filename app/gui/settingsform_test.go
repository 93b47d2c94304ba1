package gui

import (
	"strings"
	"testing"

	"strata/engine"
)

func TestSettingsFormRoundTrip(t *testing.T) {
	c := engine.DefaultConfig()
	c.TieredExperts = true
	c.ExpertCache = 96
	c.ExpertCacheDevice1 = 24
	c.MaxContext = 8192
	c.KVType = "int8"
	c.HostBudgetGiB = 12.5
	// Adaptive swaps every N tokens, auto (the default) and off each come back as they were.
	for _, adapt := range []int{32, engine.Auto, 0} {
		c.AdaptEvery = adapt
		got, err := formOf(c).config(engine.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
		}
	}
}

func TestSettingsFormValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*settingsForm)
		want string // the panel's label of the bad field
	}{
		{"letters in context", func(f *settingsForm) { f.MaxContext = "8k" }, "context length"},
		{"tiny context", func(f *settingsForm) { f.MaxContext = "100" }, "context length"},
		{"negative reserve", func(f *settingsForm) { f.VRAMReserveMiB = "-5" }, "VRAM reserve"},
		{"bad slots", func(f *settingsForm) { f.ExpertCache = "many" }, "GPU expert slots"},
		{"helper slots", func(f *settingsForm) { f.Helper1 = true; f.Helper1Slots = "x" }, "helper GPU 1"},
		{"adaptive zero", func(f *settingsForm) { f.AdaptiveSwaps = true; f.AdaptEvery = "0" }, "swap every"},
		{"kv type", func(f *settingsForm) { f.KVType = "q3" }, "--kv"},
		{"mode", func(f *settingsForm) { f.Mode = "turbo" }, "mode"},
		{"ram budget", func(f *settingsForm) { f.HostBudgetGiB = "lots" }, "RAM budget"},
		{"helpers in CPU mode", func(f *settingsForm) { f.Mode = ModeCPU; f.Helper1, f.Helper1Slots = true, "8" }, "helper GPU slots"},
		{"not built", func(f *settingsForm) { f.Spec = "2" }, "--spec"},
	} {
		f := formOf(engine.DefaultConfig())
		tc.edit(&f)
		if _, err := f.config(engine.DefaultConfig()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v should name %q", tc.name, err, tc.want)
		}
	}
	// A helper switched off ignores its slot text.
	f := formOf(engine.DefaultConfig())
	f.Helper2, f.Helper2Slots = false, "garbage"
	if c, err := f.config(engine.DefaultConfig()); err != nil || c.ExpertCacheDevice2 != 0 {
		t.Errorf("helper off: %+v, %v", c, err)
	}
	// Modes set the backend and the expert placement.
	for mode, check := range map[string]func(engine.Config) bool{
		ModeCPU:      func(c engine.Config) bool { return c.Backend == "cpu" },
		ModeTiered:   func(c engine.Config) bool { return c.TieredExperts && !c.ResidentExperts },
		ModeResident: func(c engine.Config) bool { return c.ResidentExperts && !c.TieredExperts },
		ModeAuto:     func(c engine.Config) bool { return c.Backend == "auto" && !c.TieredExperts && !c.ResidentExperts },
	} {
		f := formOf(engine.DefaultConfig())
		f.Mode = mode
		c, err := f.config(engine.DefaultConfig())
		if err != nil || !check(c) || modeOf(c) != mode {
			t.Errorf("mode %s: %+v, %v", mode, c, err)
		}
	}
}
