package synth

import (
	"bytes"
	"math"
	"os"
	"runtime"
	"testing"

	"strata/engine/quant"
)

func TestPopularityExponent(t *testing.T) {
	for _, bad := range []struct {
		share   float64
		experts int
	}{{0.4, 3}, {1, 16}, {1.5, 16}, {math.NaN(), 16}} {
		if z, err := PopularityExponent(bad.share, bad.experts); err == nil {
			t.Errorf("share %g of %d experts: exponent %g, want an error", bad.share, bad.experts, z)
		}
	}
	if z, err := PopularityExponent(0.25, 128); err != nil || z != 0 {
		t.Errorf("a flat share gives exponent %g (%v), want 0", z, err)
	}
	prev := 0.0
	for _, share := range []float64{0.3, 0.4, 0.6, 0.9} {
		z, err := PopularityExponent(share, 128)
		if err != nil {
			t.Fatal(err)
		}
		if got := zipfQuarter(z, 128); z <= prev || math.Abs(got-share) > 1e-6 {
			t.Errorf("share %g: exponent %g (previous %g) gives the hottest quarter %g", share, z, prev, got)
		}
		prev = z
	}
}

func TestHotQuarterValidate(t *testing.T) {
	ok := tinySpec(t, quant.Q8_0, 0)
	ok.HotQuarter, ok.Reference = 0.4, []string{"Hello world"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Spec){
		"with zipf":    func(s *Spec) { s.Zipf = 1 },
		"share 1":      func(s *Spec) { s.HotQuarter = 1 },
		"negative":     func(s *Spec) { s.HotQuarter = -0.4 },
		"no reference": func(s *Spec) { s.Reference = nil },
		"3 experts":    func(s *Spec) { s.Experts, s.ExpertsUsed = 3, 1 },
	} {
		s := ok
		change(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestHotQuarterDeterministic: a balanced synth is the same bytes on every run and for
// any number of workers (the balance routes the tokens on the workers).
func TestHotQuarterDeterministic(t *testing.T) {
	s := tinySpec(t, quant.Q8_0, 0)
	s.Experts, s.ExpertsUsed = 16, 2
	s.HotQuarter, s.Reference = 0.4, []string{"The quick brown fox jumps over the lazy dog.", "Hello world, hello there."}
	a, err := os.ReadFile(write(t, s))
	if err != nil {
		t.Fatal(err)
	}
	other := 1 // workers for the second write: not the first's
	if runtime.GOMAXPROCS(0) == 1 {
		other = 2
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(other))
	b, err := os.ReadFile(write(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the same spec gave different files with %d workers", runtime.GOMAXPROCS(0))
	}
}
