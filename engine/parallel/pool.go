// Package parallel is the fixed pool of worker goroutines that the CPU kernels split their
// work across. One pool per model; no goroutine is started per operation.
package parallel

import (
	"runtime"
	"sync"
)

// Pool runs index ranges on a fixed set of workers. The caller's goroutine takes part, so a
// pool of n has n-1 background workers.
type Pool struct {
	n    int
	jobs chan job
	wg   sync.WaitGroup
}

type job struct {
	fn     func(lo, hi int)
	lo, hi int
	done   *sync.WaitGroup
}

// NewPool starts a pool of n workers; n <= 0 means one per logical CPU.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	p := &Pool{n: n, jobs: make(chan job, n*4)}
	for i := 1; i < n; i++ {
		p.wg.Add(1)
		go p.worker()
	}
	return p
}

func (p *Pool) worker() {
	defer p.wg.Done()
	for j := range p.jobs {
		j.fn(j.lo, j.hi)
		j.done.Done()
	}
}

// Size is the number of goroutines that run work, the caller's included.
func (p *Pool) Size() int { return p.n }

// For splits [0, n) into chunks of at least grain items and runs fn on each, returning when
// all have finished. Chunks are few (about four per worker) so scheduling stays cheap.
func (p *Pool) For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := p.n * 4
	if c := (n + grain - 1) / grain; c < chunks {
		chunks = c
	}
	if chunks <= 1 || p.n == 1 {
		fn(0, n)
		return
	}
	size := (n + chunks - 1) / chunks
	var done sync.WaitGroup
	// The caller runs the first chunk itself after handing out the rest.
	for lo := size; lo < n; lo += size {
		hi := min(lo+size, n)
		done.Add(1)
		p.jobs <- job{fn: fn, lo: lo, hi: hi, done: &done}
	}
	fn(0, min(size, n))
	done.Wait()
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	close(p.jobs)
	p.wg.Wait()
}
