package gpu

import (
	"time"

	"strata/cuda"
)

// StepTiming is where one decode step's time went, from the backend's side: one record per
// Read (a step ends at the Read of its logits). Turned on by STRATA_STEP_TIMING=1.
type StepTiming struct {
	Segments int // segments run (graphs launched or op-by-op runs)
	Graphs   int // of which launched as a graph
	Ops      int // ops queued in the step
	// Record is host time from the step's first op to its last segment's launch: the model's
	// Go code queuing ops, while the device sits idle waiting for the first launch.
	Record time.Duration
	// Launch is host time inside the segment runs (graph launches, captures, op-by-op runs).
	Launch time.Duration
	// GPU is the device time of the segments' work (events around each launch); GPUSpan
	// is from the first segment's start to the end of the Read's download.
	GPU, GPUSpan time.Duration
	// Read is host time in Read: waiting for the device, the logits' download and the
	// routes' download.
	Read time.Duration
}

// stepTimer measures steps with host clocks and CUDA events. It keeps a pool of event pairs
// and reuses them each step.
type stepTimer struct {
	ctx    *cuda.Context
	s      *cuda.Stream
	events []*cuda.Event // pairs: start, end of segment i
	used   int           // pairs recorded this step
	cur    StepTiming
	first  time.Time // first op of the step (zero: none yet)
	last   time.Time // end of the latest segment run
	done   []StepTiming
	tail   *cuda.Event // recorded after the Read's download
	failed bool        // an event call failed: timing stops, the work does not
}

// op notes that an op was queued.
func (t *stepTimer) op() {
	if t.first.IsZero() {
		t.first = time.Now()
	}
	t.cur.Ops++
}

// pair returns the next pair of events, creating them on first use.
func (t *stepTimer) pair() (start, end *cuda.Event) {
	if t.failed {
		return nil, nil
	}
	for len(t.events) < 2*(t.used+1) {
		e, err := t.ctx.NewEvent(true)
		if err != nil {
			t.failed = true
			return nil, nil
		}
		t.events = append(t.events, e)
	}
	start, end = t.events[2*t.used], t.events[2*t.used+1]
	t.used++
	return start, end
}

// segment wraps one segment's run (run reports whether it launched a graph).
func (t *stepTimer) segment(run func() bool) {
	start, end := t.pair()
	if start != nil && start.Record(t.s) != nil {
		t.failed = true
	}
	t0 := time.Now()
	graph := run()
	t1 := time.Now()
	if end != nil && end.Record(t.s) != nil {
		t.failed = true
	}
	t.cur.Segments++
	if graph {
		t.cur.Graphs++
	}
	t.cur.Launch += t1.Sub(t0)
	t.last = t1
}

// read wraps the Read that ends a step: it waits for the device, so the events are done
// when it returns.
func (t *stepTimer) read(read func()) {
	if !t.first.IsZero() && !t.last.IsZero() {
		t.cur.Record = t.last.Sub(t.first) - t.cur.Launch
	}
	t0 := time.Now()
	read()
	t.cur.Read = time.Since(t0)
	if !t.failed && t.used > 0 {
		if t.tail == nil {
			e, err := t.ctx.NewEvent(true)
			if err != nil {
				t.failed = true
			}
			t.tail = e
		}
		if !t.failed && t.tail.Record(t.s) == nil && t.tail.Synchronize() == nil {
			for i := range t.used {
				if d, err := t.events[2*i+1].Since(t.events[2*i]); err == nil {
					t.cur.GPU += d
				}
			}
			if d, err := t.tail.Since(t.events[0]); err == nil {
				t.cur.GPUSpan = d
			}
		}
	}
	t.done = append(t.done, t.cur)
	t.cur, t.used, t.first, t.last = StepTiming{}, 0, time.Time{}, time.Time{}
}

// take returns the steps recorded since the last call.
func (t *stepTimer) take() []StepTiming {
	d := t.done
	t.done = nil
	return d
}

func (t *stepTimer) close() {
	for _, e := range t.events {
		_ = e.Destroy()
	}
	_ = t.tail.Destroy()
	t.events, t.tail = nil, nil
}

// StepTimings returns the steps timed since the last call (nil unless STRATA_STEP_TIMING=1
// was set when the backend was made).
func (b *Backend) StepTimings() []StepTiming {
	if b.step.timer == nil {
		return nil
	}
	return b.step.timer.take()
}
