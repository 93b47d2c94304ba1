package experts

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestShareTunerFindsTheBalance drives the tuner with steps whose time is a fixed part plus
// the slower of the CPU's share of the pinned misses and the GPU's, with noise: it should
// settle near the share where the two take as long, or at a bound when one side is always
// the faster.
func TestShareTunerFindsTheBalance(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cpu, pcie      float64 // ms for all of a step's pinned misses on each side
		lo, hi         float64 // where the late mean share must fall
		pauseEvery     int     // a long pause between replies every so many steps (0: none)
		interruptEvery int
	}{
		{"balanced", 10, 15, 0.3, 0.5, 0, 0},                 // best 0.4
		{"slow bus", 10, 100, 0, 0.2, 0, 0},                  // best 0.09
		{"fast bus", 10, 1, 0.75, tuneMaxShare + 1e-9, 0, 0}, // best 0.91, capped at 0.9
		{"pauses and swap passes", 10, 15, 0.3, 0.5, 97, 32},
	} {
		rng := rand.New(rand.NewPCG(3, 4))
		tu := newShareTuner(tuneStart)
		now := time.Unix(0, 0)
		const steps = 6000
		var late float64
		for i := range steps {
			tu.decodeStep(now)
			if tc.interruptEvery > 0 && i%tc.interruptEvery == 0 {
				tu.interrupt()
				now = now.Add(50 * time.Millisecond)
			}
			s := tu.share
			ms := 5 + math.Max(tc.cpu*(1-s), tc.pcie*s)
			ms *= 1 + 0.1*(2*rng.Float64()-1)
			now = now.Add(time.Duration(ms * float64(time.Millisecond)))
			if tc.pauseEvery > 0 && i%tc.pauseEvery == 0 {
				now = now.Add(30 * time.Second)
			}
			if i >= steps/2 {
				late += s / (steps - steps/2)
			}
		}
		if late < tc.lo || late > tc.hi {
			t.Errorf("%s: mean share %.3f over the later steps, want [%g, %g]", tc.name, late, tc.lo, tc.hi)
		}
		t.Logf("%s: mean share %.3f late, ends at %.3f", tc.name, late, tu.share)
	}
}

// TestShareTunerBatchStepsAreNotTimed: a batch between two decode steps leaves the time
// across it out.
func TestShareTunerBatchStepsAreNotTimed(t *testing.T) {
	tu := newShareTuner(tuneStart)
	now := time.Unix(0, 0)
	tu.decodeStep(now)
	tu.batchStep()
	tu.decodeStep(now.Add(time.Second))
	if tu.n != 0 || tu.sum != 0 {
		t.Errorf("the step across a batch was timed: %d steps, %v", tu.n, tu.sum)
	}
}

// TestSplitPCIe gives the GPU the share times a layer's pinned misses, rounded: a layer
// with one or two misses at a share of 0.2 keeps them on the CPU, one with eight gives two.
func TestSplitPCIe(t *testing.T) {
	for _, tc := range []struct {
		share     float64
		misses, k int
	}{
		{0, 5, 0}, {0.2, 1, 0}, {0.2, 2, 0}, {0.2, 3, 1}, {0.2, 8, 2}, {0.45, 2, 1},
		{0.5, 1, 1}, {1, 4, 4}, {0.9, 1, 1}, {0.3, 0, 0},
	} {
		c := &Cache{cfg: CacheConfig{PCIeFrac: tc.share}}
		pinned := make([]entry, tc.misses)
		for i := range pinned {
			pinned[i].expt = int32(i)
		}
		onCPU, onGPU := c.splitPCIe(pinned)
		if len(onGPU) != tc.k || len(onCPU)+len(onGPU) != tc.misses {
			t.Errorf("share %g of %d misses: %d on the CPU, %d over PCIe; want %d over PCIe", tc.share, tc.misses, len(onCPU), len(onGPU), tc.k)
			continue
		}
		// The two lists share an array: growing the CPU's must not write over the GPU's.
		if cap(onCPU) != len(onCPU) {
			t.Errorf("share %g of %d misses: the CPU's list has room to grow into the GPU's", tc.share, tc.misses)
		}
	}
}
