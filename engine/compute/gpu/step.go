package gpu

import (
	"hash/maphash"
	"log/slog"
	"slices"
	"unsafe"
)

// stepGraph replays recurring runs of ops as CUDA graphs. The backend never sees "a step",
// so it works on segments: the ops between two points where the host synchronises with the
// device (brk: a download or a pageable upload; end: the backend's Read). Each op describes
// itself (a signature: an op code, then every pointer, size and scalar it launches with) and
// hands over a function that queues its work; a segment's ops are held until its end. A
// segment seen before with the same signature is captured into a graph and launched; later
// ones launch the graph. Whole-GPU decode is one segment per token; with the expert tiers,
// which synchronise once per layer for the routes, each layer's attention is a segment of
// its own. Segments change only in what is in device memory (positions and the token id
// come through pinned host memory copied by nodes of the graph), never in pointers or shapes.
type stepGraph struct {
	enabled bool
	// capture records fns into a graph (nil, err when it cannot; the fns have not run).
	capture func(fns []func() error) (graphRunner, error)
	report  func(error) // records an op's error (the backend's sticky error)
	// minOps: shorter segments run op by op (a graph launch costs about one kernel launch).
	minOps int
	// maxOps (0: none) ends a segment after this many ops, so the device starts on a step's
	// first ops while the host still queues its last ones.
	maxOps int

	cur    []uint64 // this segment's signature so far
	held   []func() error
	seed   maphash.Seed
	seen   map[uint64]bool // signatures (hashed) that ran op by op once
	graphs map[uint64]*cachedGraph
	clock  uint64 // for evicting the least recently used graph

	// timer (nil: off) times each segment and step (STRATA_STEP_TIMING=1).
	timer *stepTimer

	// queued counts the ops queued and the breaks for other work on the stream: unchanged
	// between two points, nothing was queued between them (the route mail's check).
	queued uint64

	Replays   int // segments launched as a graph (for tests and logs)
	Captures  int // graphs captured
	Evictions int // graphs dropped to stay within maxGraphs
}

// cachedGraph is a captured segment and the exact signature it replays.
type cachedGraph struct {
	sig  []uint64
	g    graphRunner
	used uint64
}

const (
	// stepChunkOps is the backend's maxOps: a 30b-a3b decode step is about 680 ops, and
	// cuGraphLaunch of it as one graph took 214 us of host time on the H200 before the
	// device started (after 184 us of queuing them); cut into graphs of 48 ops, the device
	// runs each while the host queues and launches the next (187 -> 195 tokens/s).
	stepChunkOps = 48

	maxGraphs = 256  // captured segments kept
	maxSeen   = 4096 // signatures remembered before the memory is cleared
	minOps    = 4
)

// graphRunner is an instantiated graph bound to the backend's stream.
type graphRunner interface {
	Launch() error
	Destroy() error
}

// op holds one op's work until the segment ends; sig describes everything the work depends
// on apart from device memory contents.
func (g *stepGraph) op(fn func() error, sig ...uint64) {
	g.queued++
	if g.timer != nil {
		g.timer.op()
	}
	if !g.enabled {
		g.report(fn())
		return
	}
	g.cur = append(g.cur, uint64(len(sig)))
	g.cur = append(g.cur, sig...)
	g.held = append(g.held, fn)
	if g.maxOps > 0 && len(g.held) >= g.maxOps {
		g.flush()
	}
}

// brk is called before work that synchronises with the host or cannot be captured: the
// segment so far runs (as a graph when it can), then the caller's work follows in order.
func (g *stepGraph) brk() {
	g.queued++
	g.flush()
}

// end closes a segment at the backend's Read.
func (g *stepGraph) end() { g.flush() }

// flush runs the held segment: its graph when one is cached, a new graph when the same
// signature ran before, else op by op.
func (g *stepGraph) flush() {
	if !g.enabled || len(g.held) == 0 {
		g.cur, g.held = g.cur[:0], g.held[:0]
		return
	}
	if g.timer != nil {
		g.timer.segment(g.run)
		return
	}
	g.run()
}

// run runs the held segment and reports whether it went as a graph.
func (g *stepGraph) run() bool {
	if len(g.held) >= g.minOpsOrDefault() {
		if g.seen == nil {
			g.seen, g.graphs, g.seed = map[uint64]bool{}, map[uint64]*cachedGraph{}, maphash.MakeSeed()
		}
		h := g.hash(g.cur)
		if cg := g.graphs[h]; cg != nil && slices.Equal(cg.sig, g.cur) {
			if g.launch(cg) {
				return true
			}
		} else if g.seen[h] {
			if cg := g.captureHeld(h); cg != nil && g.launch(cg) {
				return true
			}
		} else {
			if len(g.seen) >= maxSeen {
				clear(g.seen)
			}
			g.seen[h] = true
		}
	}
	g.runHeld()
	return false
}

func (g *stepGraph) minOpsOrDefault() int {
	if g.minOps > 0 {
		return g.minOps
	}
	return minOps
}

func (g *stepGraph) hash(sig []uint64) uint64 {
	if len(sig) == 0 {
		return maphash.Bytes(g.seed, nil)
	}
	// One call over the words' bytes: a step's signature is thousands of words, hashed on
	// the host before every launch.
	return maphash.Bytes(g.seed, unsafe.Slice((*byte)(unsafe.Pointer(&sig[0])), 8*len(sig)))
}

// runHeld runs the held ops one by one.
func (g *stepGraph) runHeld() {
	for _, fn := range g.held {
		g.report(fn())
	}
	g.reset()
}

func (g *stepGraph) reset() {
	clear(g.held)
	g.cur, g.held = g.cur[:0], g.held[:0]
}

// captureHeld records the held ops into a new cached graph (nil after turning graphs off
// when the capture fails; the ops are still held).
func (g *stepGraph) captureHeld(h uint64) *cachedGraph {
	gr, err := g.capture(g.held)
	if err != nil {
		slog.Warn("gpu: capturing a decode segment failed; running op by op from now on", "err", err)
		g.disable()
		return nil
	}
	if old := g.graphs[h]; old != nil { // a hash collision: the new signature wins
		g.report(old.g.Destroy())
	}
	if len(g.graphs) >= maxGraphs {
		g.evict()
	}
	cg := &cachedGraph{sig: slices.Clone(g.cur), g: gr}
	g.graphs[h] = cg
	g.Captures++
	return cg
}

// evict destroys the least recently used graph.
func (g *stepGraph) evict() {
	var oldest uint64
	var key uint64
	first := true
	for k, cg := range g.graphs {
		if first || cg.used < oldest {
			oldest, key, first = cg.used, k, false
		}
	}
	if cg := g.graphs[key]; cg != nil {
		g.report(cg.g.Destroy())
		delete(g.graphs, key)
		g.Evictions++
	}
}

// launch replays cg for the held ops; false (graphs turned off, ops still held) on failure.
func (g *stepGraph) launch(cg *cachedGraph) bool {
	if err := cg.g.Launch(); err != nil {
		slog.Warn("gpu: launching a decode segment's graph failed; running op by op from now on", "err", err)
		g.disable()
		return false
	}
	g.clock++
	cg.used = g.clock
	g.Replays++
	g.reset()
	return true
}

// disable turns graphs off for good (the held ops stay held for the caller to run).
func (g *stepGraph) disable() {
	for _, cg := range g.graphs {
		g.report(cg.g.Destroy())
	}
	g.graphs, g.seen = nil, nil
	g.enabled = false
}
