package gpu

import (
	"errors"
	"fmt"

	"strata/cuda"
	"strata/engine/compute"
)

// copyLane is a second stream for slot writes that run beside the compute stream's kernels
// (WriteSlotsAsync), and its events; all created at the first such write, destroyed at
// Close.
type copyLane struct {
	s *cuda.Stream
	// before marks the compute stream's work queued before a write, which the write's copies
	// wait for. Each write records it again only after it queued the copy stream's wait on
	// the last record (cuStreamWaitEvent takes the event's state when it is called).
	before *cuda.Event
	// tail marks the copy stream's end, for work on the compute stream that must follow
	// every copy queued so far (afterCopies); recorded and waited for at once.
	tail *cuda.Event
	// free are "copies done" events whose waits are queued, so they may be recorded again;
	// all holds every one made. A write takes one and its wait gives it back: an event
	// recorded anew before its waiter was queued would let the waiter skip the copies.
	free, all []*cuda.Event
	// pending counts writes whose wait has not been queued: the compute stream is not
	// ordered after their copies yet.
	pending int
}

// WriteSlotsAsync queues copies of writes into VRAM slots of wt on a stream of their own,
// so that they run while the compute stream's kernels do, and returns without waiting for
// them. The copies start once the work queued so far on the compute stream is done (a
// kernel queued earlier may still read the slots). Every source must lie in registered
// host memory (the pinned arena) and stay as it is until the copies are done (Synchronize
// and a WriteSlots into host slots wait for them). wait makes the work queued on the
// compute stream afterwards wait for the copies, without the host waiting: call it right
// before queueing the kernels that read the slots. On an error no copy of the call is left
// running, so the caller may fall back to WriteSlots.
func (b *Backend) WriteSlotsAsync(wt compute.Weight, writes []compute.SlotWrite) (wait func() error, err error) {
	w, err := b.registeredWrites(wt, writes)
	if err != nil {
		return nil, err
	}
	done, err := b.lap.event(b.ctx)
	if err != nil {
		return nil, fmt.Errorf("gpu: %s: copy stream: %w", w.name, err)
	}
	b.step.brk()
	b.q8.drop()
	if err := b.queueLap(w, writes, done); err != nil {
		// Copies queued before the failure may still read their sources or write the slots.
		err = errors.Join(fmt.Errorf("gpu: %s: asynchronous copies: %w", w.name, err), b.lap.s.Synchronize())
		b.lap.free = append(b.lap.free, done)
		return nil, err
	}
	b.lap.pending++
	return b.lapWait(w.name, done), nil
}

// queueLap queues writes on the copy stream behind the compute stream's work so far, and
// records done after them.
func (b *Backend) queueLap(w *Weight, writes []compute.SlotWrite, done *cuda.Event) error {
	if err := b.lap.before.Record(b.s); err != nil {
		return err
	}
	if err := b.lap.s.Wait(b.lap.before); err != nil {
		return err
	}
	if err := b.queueDMA(b.lap.s, w, writes); err != nil {
		return err
	}
	return done.Record(b.lap.s)
}

// lapWait is WriteSlotsAsync's wait for done: the compute stream waits for it (once; later
// calls do nothing), and done goes back to the pool.
func (b *Backend) lapWait(name string, done *cuda.Event) func() error {
	waited := false
	return func() error {
		if waited {
			return nil
		}
		waited = true
		b.lap.pending--
		b.step.brk()
		if err := b.s.Wait(done); err != nil {
			// Not given back: whether the wait took the event is unknown.
			return fmt.Errorf("gpu: %s: waiting for the asynchronous copies: %w", name, err)
		}
		b.lap.free = append(b.lap.free, done)
		return nil
	}
}

// event opens the lane at its first use and takes a "copies done" event from the pool.
func (l *copyLane) event(ctx *cuda.Context) (*cuda.Event, error) {
	if l.s == nil {
		if err := l.open(ctx); err != nil {
			return nil, err
		}
	}
	if n := len(l.free); n > 0 {
		ev := l.free[n-1]
		l.free = l.free[:n-1]
		return ev, nil
	}
	ev, err := ctx.NewEvent(false)
	if err != nil {
		return nil, err
	}
	l.all = append(l.all, ev)
	return ev, nil
}

// open creates the copy stream and its two fixed events.
func (l *copyLane) open(ctx *cuda.Context) error {
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	before, err := ctx.NewEvent(false)
	if err != nil {
		return errors.Join(err, s.Destroy())
	}
	tail, err := ctx.NewEvent(false)
	if err != nil {
		return errors.Join(err, before.Destroy(), s.Destroy())
	}
	l.s, l.before, l.tail = s, before, tail
	return nil
}

// afterCopies makes the work queued next on the compute stream wait for every copy on the
// copy stream whose wait is not queued yet, so that another write into VRAM slots, or a
// read of them, comes after those copies. The host does not wait.
func (b *Backend) afterCopies() error {
	if b.lap.pending == 0 {
		return nil
	}
	b.step.brk()
	if err := b.lap.tail.Record(b.lap.s); err != nil {
		return fmt.Errorf("gpu: copy stream: %w", err)
	}
	if err := b.s.Wait(b.lap.tail); err != nil {
		return fmt.Errorf("gpu: copy stream: %w", err)
	}
	return nil
}

// sync waits until the copy stream has run every copy queued on it, so that their
// sources may be overwritten.
func (l *copyLane) sync() error {
	if l.s == nil {
		return nil
	}
	if err := l.s.Synchronize(); err != nil {
		return fmt.Errorf("gpu: copy stream: %w", err)
	}
	return nil
}

// close waits for the copy stream and destroys it and its events.
func (l *copyLane) close() error {
	if l.s == nil {
		return nil
	}
	errs := []error{l.s.Synchronize(), l.before.Destroy(), l.tail.Destroy()}
	for _, ev := range l.all {
		errs = append(errs, ev.Destroy())
	}
	errs = append(errs, l.s.Destroy())
	*l = copyLane{}
	return errors.Join(errs...)
}
