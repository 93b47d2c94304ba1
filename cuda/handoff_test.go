package cuda_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"strata/cuda"
)

// lateRows is a page-locked, mapped area for the hand-off benchmark: a flag on its own cache
// line, then n floats of rows, then n floats the device may write for the host.
type lateRows struct {
	hb   *cuda.HostBuffer
	flag *uint32
	rows []float32
	out  []float32
	n    int
}

func newLateRows(t testing.TB, g *gpu, n int) *lateRows {
	t.Helper()
	hb, err := g.ctx.HostAlloc(64 + 8*n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hb.Free() })
	f := unsafe.Slice((*float32)(unsafe.Pointer(&hb.Bytes[64])), 2*n)
	return &lateRows{hb: hb, flag: (*uint32)(unsafe.Pointer(&hb.Bytes[0])), rows: f[:n], out: f[n:], n: n}
}

func (l *lateRows) flagDev() cuda.DevicePtr { return l.hb.Dev }
func (l *lateRows) rowsDev() cuda.DevicePtr { return l.hb.Dev.Add(64) }
func (l *lateRows) outDev() cuda.DevicePtr  { return l.hb.Dev.Add(64 + 4*l.n) }

// BenchmarkHandoff times a tiered decode layer's two hand-offs between host and device on
// the host's clock: from the host's store that makes a layer's CPU rows ready (the stream
// waits for it, Stream.WaitValue, then an add reads the rows in place) to the host holding
// a result that depends on them. The device has been idle at the wait for 100 us (the
// CPU's misses) when the store comes. The cases differ in how the host learns of the end:
// copies into page-locked memory and a stream synchronisation (how a layer's x and routes
// came back), or the device writing mapped host memory that the host polls (router_f32's
// mail). us/handoff is the median, p90 the 90th percentile.
func BenchmarkHandoff(b *testing.B) {
	g := setup(b)
	const n = 2048 // q30b's hidden size: a layer's rows and x
	l := newLateRows(b, g, n)
	acc := g.buf(b, 4*n)
	if err := g.s.Memset(acc, 0, 4*n); err != nil {
		b.Fatal(err)
	}
	zeros := g.buf(b, 4*n)
	if err := g.s.Memset(zeros, 0, 4*n); err != nil {
		b.Fatal(err)
	}
	down, err := g.ctx.HostAlloc(16 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer down.Free()
	if err := g.s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	var ticket uint32
	atomic.StoreUint32(l.flag, 0)
	type step func() error
	wait := func() error { return g.s.WaitValue(l.flagDev(), ticket) }
	plainAdd := func() error { return g.k.Add(g.s, acc, l.rowsDev(), acc, n) }
	copies := func() error {
		if err := g.s.CopyFromDevice(unsafe.Pointer(&down.Bytes[0]), acc, 4*n); err != nil {
			return err
		}
		return g.s.CopyFromDevice(unsafe.Pointer(&down.Bytes[8*n]), zeros, 4*n)
	}
	toHost := func() error { return g.k.Add(g.s, acc, zeros, l.outDev(), n) }
	// A q30b router (128 experts, top 8) over acc, its routes copied back, or mailed.
	const experts, topK = 128, 8
	r := rand.New(rand.NewPCG(3, 4))
	rw := upload(b, g, randFloats(r, experts*n, 0.1))
	logits, ids, ws, done := g.buf(b, 4*experts), g.buf(b, 4*topK), g.buf(b, 4*topK), g.buf(b, 4)
	if err := g.s.Memset(done, 0, 4); err != nil {
		b.Fatal(err)
	}
	mailHB, err := g.ctx.HostAlloc(cuda.RouteMailBytes(n))
	if err != nil {
		b.Fatal(err)
	}
	defer mailHB.Free()
	mailTag := (*uint32)(unsafe.Pointer(&mailHB.Bytes[0]))
	router := func() error {
		return g.k.RouterF32(g.s, acc, rw, 0, logits, ids, ws, done, n, experts, topK, cuda.RouteSoftmaxNorm)
	}
	routerMail := func() error {
		return g.k.RouterF32Mail(g.s, acc, rw, 0, logits, ids, ws, done, n, experts, topK, cuda.RouteSoftmaxNorm, mailHB.Dev, ticket)
	}
	mailEnd := func(float32) error {
		for atomic.LoadUint32(mailTag) != ticket {
		}
		return nil
	}
	syncEnd := func(float32) error { return g.s.Synchronize() }
	pollEnd := func(want float32) error {
		p := (*uint32)(unsafe.Pointer(&l.out[n-1]))
		for math.Float32frombits(atomic.LoadUint32(p)) != want {
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		queue  []step
		end    func(want float32) error
		mapped bool
	}{
		{"wait-add-copies-sync", []step{wait, plainAdd, copies}, syncEnd, false},
		{"wait-add-mapped-poll", []step{wait, plainAdd, toHost}, pollEnd, true},
		{"wait-sync", []step{wait}, syncEnd, false},
		{"wait-add-router-copies-sync", []step{wait, plainAdd, router, copies}, syncEnd, false},
		{"wait-add-router-mail", []step{wait, plainAdd, routerMail}, mailEnd, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				ticket++
				for j := range l.rows {
					l.rows[j] = 0
				}
				l.rows[n-1] = float32(ticket % 1000)
				if err := g.s.Memset(acc, 0, 4*n); err != nil {
					b.Fatal(err)
				}
				for _, q := range c.queue {
					if err := q(); err != nil {
						b.Fatal(err)
					}
				}
				spin(100 * time.Microsecond)
				t0 := time.Now()
				atomic.StoreUint32(l.flag, ticket)
				if err := c.end(float32(ticket % 1000)); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				if c.mapped {
					if err := g.s.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := g.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "us/handoff")
			b.ReportMetric(float64(took[len(took)*9/10].Nanoseconds())/1e3, "us-p90")
		})
	}
}

// spin waits d without giving up the thread, as the host pool does around a step.
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// TestRouterF32Mail: a router launched with a mail posts exactly what it leaves in VRAM
// (the ids and weights, bit for bit) and its input row, then its tag; of two launches
// queued back to back the mail holds the second's.
func TestRouterF32Mail(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(21, 22))
	done := g.buf(t, 4)
	if err := g.s.Memset(done, 0, 4); err != nil {
		t.Fatal(err)
	}
	for _, sh := range []struct{ cols, nExp, k int }{{2048, 128, 8}, {2880, 32, 4}, {64, 2048, 32}, {148, 60, 4}} {
		hb, err := g.ctx.HostAlloc(cuda.RouteMailBytes(sh.cols))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hb.Free() })
		tag := (*uint32)(unsafe.Pointer(&hb.Bytes[0]))
		atomic.StoreUint32(tag, 0)
		w := upload(t, g, randFloats(r, sh.nExp*sh.cols, 0.1))
		dl := g.buf(t, 4*sh.nExp)
		var xs [2][]float32
		var ids, ws [2]cuda.DevicePtr
		for i := range 2 {
			xs[i] = randFloats(r, sh.cols, 1)
			ids[i], ws[i] = g.buf(t, 4*sh.k), g.buf(t, 4*sh.k)
			if err := g.k.RouterF32Mail(g.s, upload(t, g, xs[i]), w, 0, dl, ids[i], ws[i], done, sh.cols, sh.nExp, sh.k, cuda.RouteSoftmaxNorm, hb.Dev, uint32(10+i)); err != nil {
				t.Fatal(err)
			}
		}
		for atomic.LoadUint32(tag) != 11 {
		}
		gotIDs := unsafe.Slice((*int32)(unsafe.Pointer(&hb.Bytes[cuda.RouteMailIDs])), sh.k)
		gotWs := unsafe.Slice((*float32)(unsafe.Pointer(&hb.Bytes[cuda.RouteMailWeights])), sh.k)
		gotX := unsafe.Slice((*float32)(unsafe.Pointer(&hb.Bytes[cuda.RouteMailX])), sh.cols)
		// Copied before the synchronisation: the tag alone must make them valid.
		mailIDs, mailWs, mailX := slices.Clone(gotIDs), slices.Clone(gotWs), slices.Clone(gotX)
		if err := g.s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		wantIDs, wantWs := download[int32](t, g, ids[1], sh.k), download[float32](t, g, ws[1], sh.k)
		if !slices.Equal(mailIDs, wantIDs) {
			t.Errorf("cols=%d experts=%d: mailed ids %v, in VRAM %v", sh.cols, sh.nExp, mailIDs, wantIDs)
		}
		for i := range wantWs {
			if math.Float32bits(mailWs[i]) != math.Float32bits(wantWs[i]) {
				t.Errorf("cols=%d experts=%d: mailed weight %d = %v, in VRAM %v", sh.cols, sh.nExp, i, mailWs[i], wantWs[i])
			}
		}
		for i := range xs[1] {
			if math.Float32bits(mailX[i]) != math.Float32bits(xs[1][i]) {
				t.Fatalf("cols=%d experts=%d: mailed x[%d] = %v, want %v", sh.cols, sh.nExp, i, mailX[i], xs[1][i])
			}
		}
	}
	if c := download[uint32](t, g, done, 1)[0]; c != 0 {
		t.Errorf("the counter is %d after the launches, want 0", c)
	}
}
