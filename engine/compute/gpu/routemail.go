package gpu

import (
	"log/slog"
	"math"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/parallel"
)

// The route mail. With the expert tiers the host reads every decode layer's routes, and
// the MoE input with them where experts run off the device. Brought back by two downloads
// and a wait for the stream, that hand-off took 28.4 us from the misses' rows made ready to
// the routes on the host, against 15.0 us when the router writes them into page-locked
// memory itself and the host polls for its tag (cuda's BenchmarkHandoff on the H200,
// wait-add-router-copies-sync against wait-add-router-mail), once a layer. MailRoutes turns
// it on; STRATA_ROUTE_MAIL=0 keeps the downloads (to compare them).
//
// The tag a router writes is its route's place in the routing arena plus one, so a graph
// of the layer replays with the same one; it is unique among the routes the arena holds.
// The tag word is zeroed whenever no router can still write it (the stream waited for, or
// the awaited router found last on it), so a tag read is always the awaited router's.

// routeMail is the page-locked area router_f32 posts to, and the route posted last.
type routeMail struct {
	hb   *cuda.HostBuffer
	tag  *uint32
	cols int // the longest row it holds

	// The route posted last; r is nil when none waits to be read.
	r    *compute.Routes
	want uint32         // its tag
	x    cuda.DevicePtr // the row its router read
	n    int            // that row's length
	at   uint64         // the step's count of queued work right after its launch
}

// mailWait bounds the host's poll for a tag before it waits for the stream instead (a
// decode layer's chain takes ~50-100 us; a wait this long means something else runs).
const mailWait = 2 * time.Millisecond

// MailRoutes has the routers of decode rows post their routes and input row to the host
// (on), for a caller that reads both at every layer: the expert cache.
func (b *Backend) MailRoutes(on bool) {
	b.mailOn = on && os.Getenv("STRATA_ROUTE_MAIL") != "0"
}

// mailFor returns the route mail for rows of cols values, made (or remade larger) on first
// use; nil when mail is off or the page-locked memory cannot be had (it is then turned off).
func (b *Backend) mailFor(cols int) *routeMail {
	if !b.mailOn {
		return nil
	}
	if m := b.mail; m != nil && m.cols >= cols {
		return m
	}
	if b.mail != nil {
		// A router of the old mail may still write it.
		if err := b.Synchronize(); err != nil {
			b.err.Set(err)
			return nil
		}
		if err := b.mail.hb.Free(); err != nil {
			b.err.Set(err)
		}
		b.mail = nil
	}
	hb, err := b.ctx.HostAlloc(cuda.RouteMailBytes(cols))
	if err != nil {
		b.mailOn = false
		slog.Warn("gpu: routes are downloaded after each decode layer", "err", err)
		return nil
	}
	m := &routeMail{hb: hb, tag: (*uint32)(unsafe.Pointer(&hb.Bytes[0])), cols: cols}
	atomic.StoreUint32(m.tag, 0)
	b.mail = m
	return m
}

// post records r as the route whose router was just queued with tag, reading row x of n.
func (m *routeMail) post(r *compute.Routes, tag uint32, x cuda.DevicePtr, n int, at uint64) {
	m.r, m.want, m.x, m.n, m.at = r, tag, x, n, at
}

// idle notes that no router can write the mail: the tag is zeroed and no route waits.
func (m *routeMail) idle() {
	if m != nil {
		atomic.StoreUint32(m.tag, 0)
		m.r = nil
	}
}

// mailed reports whether r (nil: whatever route was posted) can be read from the mail, and
// with it row x of n floats when x is not 0: r was posted last and is the only route
// pending, and nothing was queued on the stream since.
func (b *Backend) mailed(r *compute.Routes, x cuda.DevicePtr, n int) bool {
	m := b.mail
	if m == nil || m.r == nil || (r != nil && m.r != r) || m.at != b.step.queued {
		return false
	}
	if p := b.routes.pending; len(p) != 1 || p[0].r != m.r {
		return false
	}
	return x == 0 || (x == m.x && n == m.n)
}

// readMail ends the step's segment and waits for the posted route's tag, then fills the
// route (and dst, the row, when not nil) from the mail. It reports false, with nothing
// read, where the tag did not come although the stream finished: mail is then turned off
// and the caller downloads instead.
func (b *Backend) readMail(dst []float32) bool {
	ok := false
	b.finishStep(func() {
		m := b.mail
		if !m.await(m.want) {
			if err := b.s.Synchronize(); err != nil {
				b.err.Set(err)
				return
			}
			if atomic.LoadUint32(m.tag) != m.want {
				b.mailOn = false
				slog.Warn("gpu: a router's mail did not arrive; routes are downloaded from now on")
				return
			}
		}
		if dst != nil {
			copy(dst, floatsOf(m.hb.Bytes[cuda.RouteMailX:cuda.RouteMailX+4*m.n]))
		}
		r := m.r
		ids := uint32sOf(m.hb.Bytes[cuda.RouteMailIDs:cuda.RouteMailWeights])
		ws := uint32sOf(m.hb.Bytes[cuda.RouteMailWeights:cuda.RouteMailX])
		for i := range r.IDs {
			r.IDs[i] = int32(ids[i])
			r.Weights[i] = math.Float32frombits(ws[i])
		}
		a := &b.routes
		clear(a.pending)
		a.pending = a.pending[:0]
		a.used = 0
		a.gen++
		b.synced() // the router was the stream's last work: what it waited for is done
		b.mailReads++
		ok = true
	})
	return ok
}

// await polls the tag for want, for up to mailWait.
func (m *routeMail) await(want uint32) bool {
	return parallel.Poll(mailWait, func() bool { return atomic.LoadUint32(m.tag) == want })
}

// free releases the mail; no router may write it any more.
func (m *routeMail) free() error {
	if m == nil {
		return nil
	}
	return m.hb.Free()
}
