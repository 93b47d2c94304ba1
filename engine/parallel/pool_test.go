package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// covers checks that For visits every index of [0, n) exactly once.
func covers(t *testing.T, p *Pool, n, grain int) {
	t.Helper()
	seen := make([]int32, n)
	p.For(n, grain, func(lo, hi int) {
		if lo < 0 || hi > n || lo >= hi {
			t.Errorf("bad chunk [%d, %d) of %d", lo, hi, n)
			return
		}
		if hi-lo < grain && hi != n {
			t.Errorf("chunk [%d, %d) smaller than grain %d", lo, hi, grain)
		}
		for i := lo; i < hi; i++ {
			atomic.AddInt32(&seen[i], 1)
		}
	})
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("n=%d grain=%d: index %d visited %d times", n, grain, i, c)
		}
	}
}

func TestForCoversEveryIndexOnce(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8} {
		p := NewPool(size)
		for _, n := range []int{0, 1, 2, 7, 100, 1001} {
			for _, grain := range []int{0, 1, 3, 64, 5000} {
				covers(t, p, n, grain)
			}
		}
		if p.Size() != size {
			t.Errorf("Size() = %d, want %d", p.Size(), size)
		}
		p.Close()
	}
}

func TestNestedForDoesNotDeadlock(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	var total atomic.Int64
	p.For(64, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p.For(100, 1, func(lo, hi int) { total.Add(int64(hi - lo)) })
		}
	})
	if got := total.Load(); got != 6400 {
		t.Fatalf("nested For counted %d, want 6400", got)
	}
}

func TestConcurrentCallers(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				covers(t, p, 97, 2)
			}
		}()
	}
	wg.Wait()
}

func TestForAfterCloseRunsSerially(t *testing.T) {
	p := NewPool(4)
	p.Close()
	p.Close() // idempotent
	covers(t, p, 50, 1)
}

func BenchmarkForOverhead(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	var sink atomic.Int64
	for b.Loop() {
		p.For(p.Size()*4, 1, func(lo, hi int) { sink.Add(int64(hi - lo)) })
	}
}

// TestWorkersWakeAfterParking: after idling long enough to park, a worker must still join,
// shown by two chunks that can only finish when both run at the same time.
func TestWorkersWakeAfterParking(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for round := 0; round < 3; round++ {
		time.Sleep(20 * time.Millisecond) // the worker spins out and parks
		meet, ok := bothAtOnce()
		p.For(2, 1, func(lo, hi int) { meet() })
		first, second := <-ok, <-ok
		if !first || !second {
			t.Fatalf("round %d: the second chunk never ran beside the first: parked worker not woken", round)
		}
	}
}

// bothAtOnce is the body of two chunks that can finish together only when both run at the
// same time: each sends on ok whether the other arrived within 5 s.
func bothAtOnce() (meet func(), ok <-chan bool) {
	var arrived sync.WaitGroup
	arrived.Add(2)
	res := make(chan bool, 2)
	return func() {
		arrived.Done()
		done := make(chan struct{})
		go func() { arrived.Wait(); close(done) }()
		select {
		case <-done:
			res <- true
		case <-time.After(5 * time.Second):
			res <- false
		}
	}, res
}

// BenchmarkForAfterGap is decode's rhythm: the caller works alone for a gap (norms, routing,
// SwiGLU), then a region of 32 chunks of about 10 µs each. With every worker joining at
// once an op costs gap + 320 µs / size; a worker still waking up costs more. "caller-share"
// is the fraction of chunks the caller ran itself (1/size when the workers keep up).
func BenchmarkForAfterGap(b *testing.B) {
	for _, gap := range []time.Duration{5 * time.Microsecond, 50 * time.Microsecond, 200 * time.Microsecond} {
		b.Run("gap="+gap.String(), func(b *testing.B) {
			p := NewPool(2)
			defer p.Close()
			var mine, all atomic.Int64
			for b.Loop() {
				busy(gap)
				caller := goid()
				p.For(32, 1, func(lo, hi int) {
					busy(10 * time.Microsecond)
					if goid() == caller {
						mine.Add(1)
					}
					all.Add(1)
				})
			}
			b.ReportMetric(float64(mine.Load())/float64(all.Load()), "caller-share")
		})
	}
}

// busy spins for d without yielding, as arithmetic does.
func busy(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// goid is the current goroutine's id, from its stack header ("goroutine N [...").
func goid() int {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	id := 0
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = 10*id + int(c-'0')
	}
	return id
}

// TestMaybeYield: maybeYield passes through the scheduler once yieldEvery has passed since
// the yielder's last yield (a runnable goroutine gets the only P), and not before.
func TestMaybeYield(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := &Pool{epoch: time.Now().Add(-time.Hour)} // no workers: just the clock
	y := yielder{last: time.Hour}                 // yielded just now
	p.maybeYield(&y)
	if y.last != time.Hour {
		t.Fatalf("yielded %v after the last yield, before yieldEvery (%v)", y.last-time.Hour, yieldEvery)
	}
	var ran atomic.Bool
	go ran.Store(true)
	// The scheduler takes the yielder's own goroutine first one time in 61: try a few times.
	for i := 0; i < 4 && !ran.Load(); i++ {
		y.last = 0
		p.maybeYield(&y)
		if y.last < time.Hour {
			t.Fatalf("last yield %v after an overdue maybeYield, want about an hour", y.last)
		}
	}
	if !ran.Load() {
		t.Fatal("a runnable goroutine did not run on the only P across overdue maybeYield calls")
	}
}

// TestPoll: Poll reports true as soon as done does, and false once the time is up.
func TestPoll(t *testing.T) {
	calls := 0
	if !Poll(time.Hour, func() bool { calls++; return calls == 1000 }) || calls != 1000 {
		t.Fatalf("Poll stopped after %d calls, want true at call 1000", calls)
	}
	start := time.Now()
	if Poll(time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported true when done never did")
	}
	if time.Since(start) < time.Millisecond {
		t.Fatal("poll gave up before its time")
	}
}

// TestGoReturnsBeforeFn: fn runs on a worker, so Go returns while fn still waits for the
// caller, spinning or parked before; fn's For covers every index, and wait returns after
// fn.
func TestGoReturnsBeforeFn(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for round := range 4 {
		if round%2 == 1 {
			time.Sleep(20 * time.Millisecond) // the workers park
		}
		release := make(chan struct{})
		var seen [200]atomic.Int32
		finished := false
		wait := p.Go(func() {
			select {
			case <-release:
			case <-time.After(5 * time.Second):
				return // Go ran fn on the caller: the check below fails
			}
			p.For(len(seen), 3, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			finished = true
		})
		close(release)
		wait()
		if !finished {
			t.Fatalf("round %d: fn never saw the caller's release: it ran inside Go", round)
		}
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("round %d: index %d ran %d times", round, i, n)
			}
		}
	}
}

// TestGoWaitJoins: in a pool of two, the worker that runs fn is the only one, so a For in
// fn whose two chunks must run at the same time completes only if wait joins it.
func TestGoWaitJoins(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	meet, ok := bothAtOnce()
	started := make(chan struct{})
	wait := p.Go(func() {
		p.For(2, 1, func(lo, hi int) {
			if lo == 0 {
				close(started) // the For is the pool's task now
			}
			meet()
		})
	})
	select { // a worker holds fn, so the second chunk can only be the caller's
	case <-started:
	case <-time.After(5 * time.Second):
		// The worker never took fn: wait runs it, and its For's second chunk waits for a
		// worker that is free by then; the check below still needs both at once.
	}
	wait()
	if first, second := <-ok, <-ok; !first || !second {
		t.Fatal("fn's second chunk never ran beside the first: wait did not join")
	}
}

// TestGoOrphanedByFor: the only worker is busy when Go posts fn, and a For on the caller
// then makes its own task the pool's latest, so no worker ever sees fn's: wait must run fn
// itself instead of waiting for it forever.
func TestGoOrphanedByFor(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	release := make(chan struct{})
	busy := make(chan struct{}, 2)
	held := make(chan struct{})
	go func() { // both chunks block: the worker holds one, this goroutine the other
		p.For(2, 1, func(lo, hi int) { busy <- struct{}{}; <-release })
		close(held)
	}()
	<-busy
	<-busy
	ran := false
	wait := p.Go(func() { ran = true })
	var sum atomic.Int64
	p.For(8, 1, func(lo, hi int) { sum.Add(int64(hi - lo)) }) // the caller runs every chunk
	close(release)
	<-held
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("wait never returned: fn, replaced as the pool's latest task, never ran")
	}
	if !ran || sum.Load() != 8 {
		t.Errorf("fn ran %v, the For covered %d of 8", ran, sum.Load())
	}
}

// TestGoSerialPools: a pool of one, and a closed pool, run fn before Go returns.
func TestGoSerialPools(t *testing.T) {
	closed := NewPool(4)
	closed.Close()
	for _, p := range []*Pool{NewPool(1), closed} {
		ran := false
		wait := p.Go(func() { ran = true })
		if !ran {
			t.Errorf("pool of %d (closed %v): fn had not run when Go returned", p.Size(), p.closed.Load())
		}
		wait()
		p.Close()
	}
}
