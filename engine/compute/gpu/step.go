package gpu

import (
	"log/slog"
	"slices"
)

// stepGraph replays a decode step as one CUDA graph. The backend never sees "a step", so
// it takes the work between two Reads: each op describes itself (a signature: an op code,
// then every pointer, size and scalar it launches with) and hands over a function that
// queues its work. When two steps in a row have the same signature, the ops of the next
// step are held back while they keep matching; at its Read they are captured into a graph
// and launched. Later steps that match again launch the graph instead of their ops. Steps
// change only in what is in device memory (positions and the token id come through
// pinned host memory copied by nodes of the graph), never in pointers or shapes.
//
// Anything that needs the host mid-step (a download, a pageable upload) calls brk: the
// held ops run at once and the step is not a candidate. A mismatch runs the held ops too.
type stepGraph struct {
	enabled bool
	// capture records fns into a graph (nil, err when it cannot; the fns have not run).
	capture func(fns []func() error) (graphRunner, error)
	report  func(error) // records an op's error (the backend's sticky error)

	started   bool     // an op has come since the last end
	holding   bool     // this step's ops are held while they match target
	broken    bool     // this step did something a graph cannot hold
	cur       []uint64 // this step's signature so far
	held      []func() error
	last      []uint64    // the previous step's signature (nil if it was broken)
	target    []uint64    // the signature a graph is (to be) captured for
	graph     graphRunner // nil: capture at the next matching step
	Replays   int         // steps launched as a graph (for tests and logs)
	Captures  int         // graphs captured
	Fallbacks int         // held steps that ran op by op after all
}

// graphRunner is an instantiated graph bound to the backend's stream.
type graphRunner interface {
	Launch() error
	Destroy() error
}

// op runs (or holds) one op's work; sig describes everything the work depends on apart
// from device memory contents.
func (g *stepGraph) op(fn func() error, sig ...uint64) {
	if !g.enabled {
		g.report(fn())
		return
	}
	if !g.started {
		g.started = true
		g.holding = g.target != nil
	}
	start := len(g.cur)
	g.cur = append(g.cur, uint64(len(sig)))
	g.cur = append(g.cur, sig...)
	if g.holding {
		if len(g.cur) <= len(g.target) && slices.Equal(g.cur[start:], g.target[start:len(g.cur)]) {
			g.held = append(g.held, fn)
			return
		}
		g.runHeld()
	}
	g.report(fn())
}

// runHeld runs the held ops one by one and stops holding for the rest of the step.
func (g *stepGraph) runHeld() {
	if g.holding && len(g.held) > 0 {
		g.Fallbacks++
	}
	for _, fn := range g.held {
		g.report(fn())
	}
	clear(g.held)
	g.held = g.held[:0]
	g.holding = false
}

// brk is called before work that synchronises with the host or cannot be captured; it
// opens the step if no op has yet, so that the step is not learnt either way.
func (g *stepGraph) brk() {
	if !g.enabled {
		return
	}
	if g.started {
		g.runHeld()
	}
	g.started, g.broken = true, true
}

// end closes the step (the backend's Read): launch the graph or capture it when every op
// matched, else run what is held; then learn the step's signature.
func (g *stepGraph) end() {
	if !g.enabled || !g.started {
		return
	}
	replayed := false
	if g.holding && len(g.cur) == len(g.target) {
		replayed = g.launch()
	}
	g.runHeld()
	if !replayed {
		switch {
		case g.broken || len(g.cur) == 0:
			g.last = g.last[:0]
		case slices.Equal(g.cur, g.last):
			g.setTarget(g.cur)
		default:
			g.last = append(g.last[:0], g.cur...)
		}
	}
	g.cur = g.cur[:0]
	g.started, g.holding, g.broken = false, false, false
}

// launch runs the held ops as the graph, capturing it first if needed; false leaves them
// held (they then run one by one) and turns graphs off when capturing or launching fails.
func (g *stepGraph) launch() bool {
	if g.graph == nil {
		gr, err := g.capture(g.held)
		if err != nil {
			slog.Warn("gpu: capturing the decode step failed; running op by op from now on", "err", err)
			g.disable()
			return false
		}
		g.graph = gr
		g.Captures++
	}
	if err := g.graph.Launch(); err != nil {
		slog.Warn("gpu: launching the decode step's graph failed; running op by op from now on", "err", err)
		g.disable()
		return false
	}
	clear(g.held)
	g.held = g.held[:0]
	g.holding = false
	g.Replays++
	return true
}

// setTarget makes sig the signature to capture at the next matching step.
func (g *stepGraph) setTarget(sig []uint64) {
	g.dropGraph()
	g.target = append(g.target[:0], sig...)
}

func (g *stepGraph) dropGraph() {
	if g.graph != nil {
		g.report(g.graph.Destroy())
		g.graph = nil
	}
}

// disable turns graphs off for good (the held ops stay held for the caller to run).
func (g *stepGraph) disable() {
	g.dropGraph()
	g.enabled = false
	g.target, g.last = nil, nil
}
