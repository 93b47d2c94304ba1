// Package parallel is the fixed pool of worker goroutines that the CPU kernels split their
// work across. One pool per model; no goroutine is started per operation.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// idleSpin is how long an idle worker keeps polling for the next task
// before it parks. Decode runs many short products back to back with a little serial work
// between them, and waking a parked goroutine costs more than one of them. On a 2-core VM a
// 30b-a3b decode (68 steps, 18640 parallel loops) parked the worker 11723 times when it
// yielded a fixed 200 times (~10 us); 460 times at 100 us, 201 at 300 us, 48 at 1 ms.
// Where the clock ticks coarser than this, the spin lasts up to one tick.
const idleSpin = 300 * time.Microsecond

// tailSpin bounds how long For's caller watches for the last chunks to finish before it
// blocks.
const tailSpin = 50 * time.Microsecond

// yieldEvery is how often a goroutine that runs chunks back to back passes through the
// scheduler, so that other goroutines (the app's, the runtime's) waiting for a P get one
// between chunks instead of when the runtime forces it (10 ms).
const yieldEvery = 2 * time.Millisecond

// spinCheck is how many polls pass between clock reads while a goroutine spins.
const spinCheck = 256

// Pool runs index ranges on a fixed set of workers. The caller's goroutine takes part, so a
// pool of n has n-1 background workers.
//
// Chunks are claimed dynamically (an atomic counter), and handing work to the workers never
// blocks: a worker that is busy simply does not join. So the caller can always finish every
// chunk alone, which makes For safe to call from inside fn (a nested For runs mostly on the
// goroutine that called it) and from several goroutines at once.
type Pool struct {
	n      int
	cur    atomic.Pointer[task] // the latest task, watched by spinning workers
	parked atomic.Int32         // workers blocked on wake
	wake   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
	epoch  time.Time    // the clock of the yielders
	yield  atomic.Int64 // For callers' yielder (nanoseconds since epoch)
}

// task is one For call: its chunks are claimed by index until none are left.
//
// A goroutine counts the chunks it ran and subtracts them from left once, when it finds
// none left to claim, rather than after each chunk: on 16 threads a decode product of ~200
// chunks made three atomic writes a chunk to one cache line (claim, left, a WaitGroup),
// which every thread then had to fetch back. next and left sit on lines of their own.
type task struct {
	fn     func(lo, hi int)
	n      int
	size   int           // items per chunk
	chunks int64         // number of chunks
	done   chan struct{} // closed by whoever finishes the last chunk
	_      [64]byte
	next   atomic.Int64 // the next chunk to claim
	_      [56]byte
	left   atomic.Int64 // chunks not finished yet
	_      [56]byte
}

// NewPool starts a pool of n workers; n <= 0 means one per CPU the Go runtime runs
// goroutines on (GOMAXPROCS: the logical CPUs, or fewer under a container's CPU limit or
// the GOMAXPROCS variable). Workers spin between tasks without yielding, so more of them
// than that would leave some waiting for a CPU that the spinners hold.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: n, wake: make(chan struct{}, n), epoch: time.Now()}
	for i := 1; i < n; i++ {
		p.wg.Add(1)
		go p.worker()
	}
	return p
}

// worker runs the latest task it has not run yet; when there is none it spins a while,
// then parks until For or Close wakes it.
func (p *Pool) worker() {
	defer p.wg.Done()
	var seen *task
	var y yielder
	for {
		if t := p.cur.Load(); t != nil && t != seen {
			seen = t
			t.run(p, &y)
			continue
		}
		if p.closed.Load() {
			return
		}
		if p.spin(seen) {
			continue
		}
		p.parked.Add(1)
		// Re-check after announcing: a For that missed the announcement left a task here.
		if t := p.cur.Load(); (t != nil && t != seen) || p.closed.Load() {
			p.parked.Add(-1)
			continue
		}
		_, ok := <-p.wake
		p.parked.Add(-1)
		if !ok {
			return
		}
	}
}

// spin polls for up to idleSpin for a task other than seen; it reports whether one (or
// Close) came. It does not yield to the scheduler while it waits: a waiting goroutine that
// yielded sat on the run queue, the runtime handed it the P it had taken from a goroutine
// in a long C call (a kernel), and that goroutine then waited for a P when its call
// returned. A 64-token prefill on 2 cores did that ~5300 times in one bench run and ran one
// thread alone a quarter of the time; without the yields, 8% of the time.
func (p *Pool) spin(seen *task) bool {
	return Poll(idleSpin, func() bool {
		t := p.cur.Load()
		return (t != nil && t != seen) || p.closed.Load()
	})
}

// Poll calls done until it reports true (Poll then reports true) or d has passed (false),
// without yielding to the scheduler (see spin): for waits of microseconds, where waking a
// blocked goroutine costs more than the wait.
func Poll(d time.Duration, done func() bool) bool {
	var deadline time.Time
	for i := 0; ; i++ {
		if done() {
			return true
		}
		if i%spinCheck == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(d)
			} else if now.After(deadline) {
				return false
			}
		}
	}
}

// run claims and runs chunks of t until none are left, passing through the scheduler
// between chunks when y says it is time.
func (t *task) run(p *Pool, y *yielder) {
	ran := int64(0)
	for {
		c := t.next.Add(1) - 1
		if c >= t.chunks {
			break
		}
		lo := int(c) * t.size
		t.fn(lo, min(lo+t.size, t.n))
		ran++
		p.maybeYield(y)
	}
	if ran > 0 && t.left.Add(-ran) == 0 {
		close(t.done)
	}
}

// yielder is when a goroutine last passed through the scheduler, since the pool's epoch.
type yielder struct{ last time.Duration }

// maybeYield calls runtime.Gosched when yieldEvery has passed since y's last yield.
func (p *Pool) maybeYield(y *yielder) {
	if now := time.Since(p.epoch); now-y.last >= yieldEvery {
		y.last = now
		runtime.Gosched()
	}
}

// Size is the number of goroutines that run work, the caller's included.
func (p *Pool) Size() int { return p.n }

// For splits [0, n) into chunks of at least grain items and runs fn on each, returning when
// all have finished. There are about sixteen chunks per worker, claimed dynamically, so uneven
// chunks balance out while scheduling stays cheap. fn runs concurrently on different chunks;
// it may call For again (see Pool). After Close, For runs everything on the caller.
func (p *Pool) For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := p.n * 16
	if c := (n + grain - 1) / grain; c < chunks {
		chunks = c
	}
	if chunks <= 1 || p.n == 1 || p.closed.Load() {
		fn(0, n)
		return
	}
	size := max((n+chunks-1)/chunks, grain)
	t := &task{fn: fn, n: n, size: size, chunks: int64((n + size - 1) / size), done: make(chan struct{})}
	t.left.Store(t.chunks)
	p.cur.Store(t)
	// Wake parked workers, one per chunk beyond the caller's, without ever blocking.
	for i := min(int(p.parked.Load()), int(t.chunks)-1); i > 0; i-- {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	// For's callers share one yielder: usually there is one caller at a time.
	y := yielder{last: time.Duration(p.yield.Load())}
	t.run(p, &y)
	p.yield.Store(int64(y.last))
	// The last chunks usually finish within microseconds: watch for them before blocking,
	// since waking a blocked goroutine costs more than that on most VMs.
	if !Poll(tailSpin, func() bool { return t.left.Load() == 0 }) {
		<-t.done
	}
	p.cur.CompareAndSwap(t, nil) // let the finished task (and what fn holds) be collected
}

// Go starts fn on one of the pool's workers and returns at once; wait blocks until fn has
// returned. fn may call For, whose chunks the other workers join. wait runs fn itself if no
// worker has taken it yet, and while fn runs elsewhere it runs chunks of the pool's tasks
// (fn's For among them), so the caller's core keeps working; it blocks only after idleSpin without a task to join. Spinning
// workers take fn within microseconds, where a new goroutine would wait for a P that they
// hold. In a pool of one, or after Close, fn runs before Go returns. Call wait once.
func (p *Pool) Go(fn func()) (wait func()) {
	if p.n == 1 || p.closed.Load() {
		fn()
		return func() {}
	}
	job := &task{fn: func(int, int) { fn() }, n: 1, size: 1, chunks: 1, done: make(chan struct{})}
	job.left.Store(1)
	p.cur.Store(job)
	if p.parked.Load() > 0 {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return func() {
		y := yielder{last: time.Duration(p.yield.Load())}
		// fn itself when no worker has taken it: a For on another goroutine may have made
		// its task the pool's latest before any worker saw fn's.
		job.run(p, &y)
		seen := job
		for job.left.Load() != 0 {
			if t := p.cur.Load(); t != nil && t != seen {
				seen = t
				t.run(p, &y)
				continue
			}
			if !Poll(idleSpin, func() bool {
				t := p.cur.Load()
				return job.left.Load() == 0 || (t != nil && t != seen)
			}) {
				<-job.done
			}
		}
		p.cur.CompareAndSwap(job, nil)
	}
}

// Close stops the workers after the work in flight. For still works afterwards, serially.
// Close must not race with For calls on other goroutines.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	close(p.wake)
	p.wg.Wait()
}
