package gpu

import (
	"errors"
	"slices"
	"testing"
)

// fakeGraph replays the ops it was captured with into a log.
type fakeGraph struct {
	fns       []func() error
	destroyed *int
}

func (g fakeGraph) Launch() error {
	for _, fn := range g.fns {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

func (g fakeGraph) Destroy() error { *g.destroyed++; return nil }

type stepHarness struct {
	g         stepGraph
	log       []string // work as it reaches the "device"
	destroyed int
	errs      []error
}

func newStepHarness(failCapture bool) *stepHarness {
	h := &stepHarness{}
	h.g = stepGraph{
		enabled: true,
		report: func(err error) {
			if err != nil {
				h.errs = append(h.errs, err)
			}
		},
		capture: func(fns []func() error) (graphRunner, error) {
			if failCapture {
				return nil, errors.New("capture refused")
			}
			return fakeGraph{fns: slices.Clone(fns), destroyed: &h.destroyed}, nil
		},
	}
	return h
}

// step runs ops named by names (their signature is the name's bytes) and ends the step.
func (h *stepHarness) step(names ...string) {
	for _, n := range names {
		h.g.op(func() error { h.log = append(h.log, n); return nil }, sigOf(n)...)
	}
	h.g.end()
}

func sigOf(s string) []uint64 {
	var out []uint64
	for _, c := range s {
		out = append(out, uint64(c))
	}
	return out
}

// TestStepGraphLifecycle: two identical steps learn the signature, the third is captured,
// later ones replay; every step's work reaches the device exactly once and in order.
func TestStepGraphLifecycle(t *testing.T) {
	h := newStepHarness(false)
	ops := []string{"embed", "norm", "matvec", "route", "moe"}
	for i := range 6 {
		h.log = h.log[:0]
		h.step(ops...)
		if !slices.Equal(h.log, ops) {
			t.Fatalf("step %d: device saw %v, want %v", i, h.log, ops)
		}
	}
	if h.g.Captures != 1 || h.g.Replays != 4 || h.g.Fallbacks != 0 {
		t.Errorf("captures %d replays %d fallbacks %d, want 1, 4, 0", h.g.Captures, h.g.Replays, h.g.Fallbacks)
	}
	if len(h.errs) != 0 {
		t.Errorf("errors: %v", h.errs)
	}
}

// TestStepGraphMismatch: a step that departs from the graph's ops runs op by op, in
// order, and a step that is only a prefix of it is not replayed.
func TestStepGraphMismatch(t *testing.T) {
	h := newStepHarness(false)
	ops := []string{"a", "b", "c"}
	for range 3 {
		h.step(ops...)
	}
	for _, other := range [][]string{{"a", "x", "c"}, {"a", "b"}, {"a", "b", "c", "d"}, {"z"}} {
		h.log = h.log[:0]
		replays := h.g.Replays
		h.step(other...)
		if !slices.Equal(h.log, other) {
			t.Errorf("step %v: device saw %v", other, h.log)
		}
		if h.g.Replays != replays {
			t.Errorf("step %v was replayed as the graph of %v", other, ops)
		}
	}
	h.log = h.log[:0]
	h.step(ops...)
	if !slices.Equal(h.log, ops) || h.g.Replays != 2 {
		t.Errorf("back to %v: device saw %v, replays %d (want 2)", ops, h.log, h.g.Replays)
	}
}

// TestStepGraphBreak: a step that synchronises mid-way runs op by op and is never learnt.
func TestStepGraphBreak(t *testing.T) {
	h := newStepHarness(false)
	for range 4 {
		h.log = h.log[:0]
		h.g.op(func() error { h.log = append(h.log, "a"); return nil }, 1)
		h.g.brk()
		h.log = append(h.log, "sync")
		h.g.op(func() error { h.log = append(h.log, "b"); return nil }, 2)
		h.g.end()
		if !slices.Equal(h.log, []string{"a", "sync", "b"}) {
			t.Fatalf("device saw %v", h.log)
		}
	}
	if h.g.Captures != 0 || h.g.target != nil {
		t.Errorf("a broken step was captured (%d) or targeted (%v)", h.g.Captures, h.g.target)
	}
	// A step that synchronises before its first op is not learnt either.
	h2 := newStepHarness(false)
	for range 4 {
		h2.g.brk()
		h2.step("a", "b")
	}
	if h2.g.Captures != 0 || h2.g.target != nil {
		t.Errorf("a step broken before its first op was captured (%d) or targeted (%v)", h2.g.Captures, h2.g.target)
	}
}

// TestStepGraphCaptureFails: a refused capture runs the step op by op and turns graphs off.
func TestStepGraphCaptureFails(t *testing.T) {
	h := newStepHarness(true)
	for range 4 {
		h.log = h.log[:0]
		h.step("a", "b")
		if !slices.Equal(h.log, []string{"a", "b"}) {
			t.Fatalf("device saw %v", h.log)
		}
	}
	if h.g.enabled || h.g.Replays != 0 {
		t.Errorf("graphs still on (%v) or replayed %d after a failed capture", h.g.enabled, h.g.Replays)
	}
}

// TestStepGraphNewShape: a new steady shape replaces the graph (the old one destroyed).
func TestStepGraphNewShape(t *testing.T) {
	h := newStepHarness(false)
	for range 3 {
		h.step("a")
	}
	for range 3 {
		h.step("b", "b")
	}
	if h.g.Captures != 2 || h.destroyed != 1 {
		t.Errorf("captures %d destroyed %d, want 2 and 1", h.g.Captures, h.destroyed)
	}
}
