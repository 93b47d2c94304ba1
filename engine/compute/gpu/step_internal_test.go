package gpu

import (
	"errors"
	"fmt"
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
		minOps:  1,
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

// ops queues ops named by names (their signature is the name's bytes).
func (h *stepHarness) ops(names ...string) {
	for _, n := range names {
		h.g.op(func() error { h.log = append(h.log, n); return nil }, sigOf(n)...)
	}
}

// step queues ops and ends the segment (the backend's Read).
func (h *stepHarness) step(names ...string) {
	h.ops(names...)
	h.g.end()
}

func sigOf(s string) []uint64 {
	var out []uint64
	for _, c := range s {
		out = append(out, uint64(c))
	}
	return out
}

// TestStepGraphLifecycle: the first segment runs op by op, the second with the same
// signature is captured and launched, later ones replay; every segment's work reaches the
// device exactly once and in order.
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
	if h.g.Captures != 1 || h.g.Replays != 5 {
		t.Errorf("captures %d replays %d, want 1 and 5", h.g.Captures, h.g.Replays)
	}
	if len(h.errs) != 0 {
		t.Errorf("errors: %v", h.errs)
	}
}

// TestStepGraphMismatch: segments that differ from a cached one (another op, a prefix, a
// longer run) run op by op in order and are not replayed as its graph.
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
			t.Errorf("step %v was replayed as a graph on first sight", other)
		}
	}
	h.log = h.log[:0]
	h.step(ops...)
	if !slices.Equal(h.log, ops) || h.g.Replays != 3 {
		t.Errorf("back to %v: device saw %v, replays %d (want 3)", ops, h.log, h.g.Replays)
	}
}

// TestStepGraphSegments: a synchronisation mid-way splits the work into segments; the work
// before it reaches the device before the sync, and each recurring segment gets its graph
// (the tiered experts' per-layer pattern).
func TestStepGraphSegments(t *testing.T) {
	h := newStepHarness(false)
	for i := range 4 {
		h.log = h.log[:0]
		for l := range 3 {
			h.ops(fmt.Sprintf("attn%d", l), fmt.Sprintf("router%d", l))
			h.g.brk()
			h.log = append(h.log, "sync")
			h.ops(fmt.Sprintf("moe%d", l))
		}
		h.g.end()
		want := []string{"attn0", "router0", "sync", "moe0", "attn1", "router1", "sync", "moe1", "attn2", "router2", "sync", "moe2"}
		if !slices.Equal(h.log, want) {
			t.Fatalf("round %d: device saw %v, want %v", i, h.log, want)
		}
	}
	// Segments: attn0+router0, moe0+attn1+router1, moe1+attn2+router2, moe2: four per
	// round, captured in round 2 and replayed from then on.
	if h.g.Captures != 4 || h.g.Replays != 12 {
		t.Errorf("captures %d replays %d, want 4 and 12", h.g.Captures, h.g.Replays)
	}
}

// TestStepGraphShortSegments: segments below minOps always run op by op.
func TestStepGraphShortSegments(t *testing.T) {
	h := newStepHarness(false)
	h.g.minOps = 3
	for range 4 {
		h.step("a", "b")
	}
	if h.g.Captures != 0 {
		t.Errorf("a two-op segment was captured %d times", h.g.Captures)
	}
}

// TestStepGraphCaptureFails: a refused capture runs the segment op by op and turns graphs off.
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

// TestStepGraphEviction: past maxGraphs the least recently used graph is destroyed, and
// the recent ones keep replaying.
func TestStepGraphEviction(t *testing.T) {
	h := newStepHarness(false)
	for i := range maxGraphs + 10 {
		name := fmt.Sprintf("s%d", i)
		h.step(name)
		h.step(name)
	}
	if h.g.Captures != maxGraphs+10 || h.g.Evictions != 10 || h.destroyed != 10 || len(h.g.graphs) != maxGraphs {
		t.Errorf("captures %d evictions %d destroyed %d kept %d", h.g.Captures, h.g.Evictions, h.destroyed, len(h.g.graphs))
	}
	replays := h.g.Replays
	h.step(fmt.Sprintf("s%d", maxGraphs+9))
	if h.g.Replays != replays+1 {
		t.Error("the most recent segment was not replayed")
	}
}

// TestStepGraphChunks: with maxOps a step is cut into segments of that many ops, launched as
// the ops come (the device starts on the first ones while the host queues the rest); the
// cuts fall at the same ops every step, so each piece is captured once and replayed.
func TestStepGraphChunks(t *testing.T) {
	h := newStepHarness(false)
	h.g.maxOps = 3
	ops := []string{"a", "b", "c", "d", "e", "f", "g"}
	for i := range 4 {
		h.log = h.log[:0]
		h.ops(ops[:3]...)
		if !slices.Equal(h.log, ops[:3]) {
			t.Fatalf("step %d: after 3 ops the device saw %v, want them launched", i, h.log)
		}
		h.ops(ops[3:]...)
		h.g.end()
		if !slices.Equal(h.log, ops) {
			t.Fatalf("step %d: device saw %v, want %v", i, h.log, ops)
		}
	}
	// Pieces a-c, d-f, g: captured in step 2, replayed from then on.
	if h.g.Captures != 3 || h.g.Replays != 9 {
		t.Errorf("captures %d replays %d, want 3 and 9", h.g.Captures, h.g.Replays)
	}
}

// TestStepGraphHashSeesEveryWord: signatures that differ in one word of one op hash apart.
func TestStepGraphHashSeesEveryWord(t *testing.T) {
	h := newStepHarness(false)
	h.step("a")
	base := []uint64{1, 2, 3, 4, 5}
	seen := map[uint64]bool{h.g.hash(base): true}
	for i := range base {
		for _, d := range []uint64{1, 1 << 32, 1 << 63} {
			s := slices.Clone(base)
			s[i] ^= d
			hv := h.g.hash(s)
			if seen[hv] {
				t.Errorf("word %d changed by %#x: hash collides", i, d)
			}
			seen[hv] = true
		}
	}
}
