package cli

import (
	"bytes"
	"flag"
	"testing"

	"strata/engine"
)

// TestEngineFlagsTakeAuto: the knobs the engine can size or tune itself take "auto" as
// well as a number, keep their defaults when not given, and refuse other words.
func TestEngineFlagsTakeAuto(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(engine.Config) bool
		bad   bool
	}{
		{nil, func(c engine.Config) bool { return c.AdaptEvery == engine.Auto && c.PCIeFrac == engine.Auto }, false},
		{[]string{"--pcie-frac", "auto"}, func(c engine.Config) bool { return c.PCIeFrac == engine.Auto }, false},
		{[]string{"--pcie-frac", "0.35"}, func(c engine.Config) bool { return c.PCIeFrac == 0.35 }, false},
		{[]string{"--pcie-frac", "0"}, func(c engine.Config) bool { return c.PCIeFrac == 0 }, false},
		{[]string{"--adapt-every", "0"}, func(c engine.Config) bool { return c.AdaptEvery == 0 }, false},
		{[]string{"--adapt-every", "AUTO"}, func(c engine.Config) bool { return c.AdaptEvery == engine.Auto }, false},
		{[]string{"--pcie-frac", "half"}, nil, true},
		{[]string{"--pcie-frac", "-0.5"}, nil, true},
		{[]string{"--adapt-every", "often"}, nil, true},
	} {
		cfg := engine.DefaultConfig()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		addEngineFlags(fs, &cfg)
		err := fs.Parse(tc.args)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%v: accepted", tc.args)
		case !tc.bad && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !tc.bad && !tc.check(cfg):
			t.Errorf("%v: adapt-every %d, pcie-frac %g", tc.args, cfg.AdaptEvery, cfg.PCIeFrac)
		}
	}
}
