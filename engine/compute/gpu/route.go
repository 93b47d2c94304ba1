package gpu

import (
	"fmt"
	"math"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
)

// routeArenaSlots is the first size of the decode routing arena: 48 layers x 8 experts
// fit four times over, so a decode step never flushes early.
const routeArenaSlots = 2048

// devRoutes is Routes.Dev on this backend: the ids and weights RouterTopK wrote in VRAM.
type devRoutes struct {
	owner        *Backend
	ids, weights cuda.DevicePtr
	gen          uint64 // the arena generation they live in; stale once it is recycled
}

// routeArena keeps the routes of decode steps on the device, one region per Route call,
// so they survive until the host reads them all with one download at the next Read.
// Layout: ids [cap]int32, then weights [cap]float32.
type routeArena struct {
	p         cuda.DevicePtr
	cap, used int
	gen       uint64
	pending   []pendingRoute
	done      cuda.DevicePtr // router_f32's counter; 0 until the first use
}

type pendingRoute struct {
	r   *compute.Routes
	off int
}

// Op codes of the router ops (apart from the list in gpu.go).
const (
	opRouterF32 uint64 = 1100 + iota
)

// routerTopKFits reports whether the router kernels take this shape (cuda.RouterFits).
func routerTopKFits(experts, k int) bool { return cuda.RouterFits(experts, k) }

// routeMode is the kernel's mode for Route's norm flag, or RouteTopK (topKFirst).
func routeMode(topKFirst, norm bool) cuda.RouteMode {
	switch {
	case topKFirst:
		return cuda.RouteTopKSoftmax
	case norm:
		return cuda.RouteSoftmaxNorm
	}
	return cuda.RouteSoftmax
}

// RouteTopK is gpt-oss's routing: the k largest logits (ties to the lower id), then a
// softmax over those k (compute.RouteHostTopK).
func (b *Backend) RouteTopK(logits compute.Buf, n, experts, k int) *compute.Routes {
	return b.route(logits, n, experts, k, cuda.RouteTopKSoftmax)
}

// Route runs the router on the device. A single token's ids and weights stay in VRAM for
// the MoE that follows (no synchronisation) and reach the host at the next Read; a batch is
// downloaded at once, since grouping its rows by expert happens on the host.
func (b *Backend) Route(logits compute.Buf, n, experts, k int, norm bool) *compute.Routes {
	return b.route(logits, n, experts, k, routeMode(false, norm))
}

func (b *Backend) route(logits compute.Buf, n, experts, k int, mode cuda.RouteMode) *compute.Routes {
	if !routerTopKFits(experts, k) {
		b.step.brk()
		host := make([]float32, n*experts)
		b.err.Set(cuda.Download(b.s, host, dev(logits)))
		if mode == cuda.RouteTopKSoftmax {
			return compute.RouteHostTopK(host, n, experts, k)
		}
		return compute.RouteHost(host, n, experts, k, mode == cuda.RouteSoftmaxNorm)
	}
	slots := n * k
	if n > 1 {
		r := &compute.Routes{N: n, K: k, IDs: make([]int32, slots), Weights: make([]float32, slots)}
		b.step.brk()
		ids := b.scratchBuf("route ids", 4*slots)
		ws := b.scratchBuf("route weights", 4*slots)
		if ids == 0 || ws == 0 {
			return r // the allocation error is recorded
		}
		if err := b.k.RouterTopK(b.s, dev(logits), ids, ws, n, experts, k, mode); err != nil {
			b.err.Set(fmt.Errorf("gpu: route %d tokens: %w", n, err))
			return r
		}
		b.err.Set(cuda.Download(b.s, r.IDs, ids))
		b.err.Set(cuda.Download(b.s, r.Weights, ws))
		return r
	}
	lp := dev(logits)
	return b.decodeRoute(k, func(d *devRoutes) {
		b.do(func() error { return b.k.RouterTopK(b.s, lp, d.ids, d.weights, 1, experts, k, mode) },
			opRoute, u(lp), u(d.ids), u(d.weights), 1, uint64(experts), uint64(k), uint64(mode))
	})
}

// RouteRows is compute.Router: a decode row's router matrix product, bias and routing in
// one launch (router_f32) where the router is a float32 matrix the kernel can read; nil,
// having queued nothing, otherwise.
func (b *Backend) RouteRows(logits, x compute.Buf, wt, bias compute.Weight, n, experts, k int, topKFirst, norm bool) *compute.Routes {
	w := wt.(*Weight)
	xp, lp := dev(x), dev(logits)
	if n != 1 || w.typ != quant.F32 || w.exps != 1 || w.rows != experts || !cuda.RouterF32Fits(xp, w.p, w.cols, experts, k) {
		return nil
	}
	var bp cuda.DevicePtr
	if bias != nil {
		bw := bias.(*Weight)
		if bw.typ != quant.F32 || bw.rows != 1 || bw.exps != 1 || bw.cols != experts {
			return nil
		}
		bp = bw.p
	}
	done := b.routerDone()
	if done == 0 {
		return &compute.Routes{N: 1, K: k, IDs: make([]int32, k), Weights: make([]float32, k)} // the error is recorded
	}
	mode, cols := routeMode(topKFirst, norm), w.cols
	m := b.mailFor(cols)
	var mail cuda.DevicePtr
	var tag uint32
	r := b.decodeRoute(k, func(d *devRoutes) {
		if m != nil {
			mail, tag = m.hb.Dev, uint32(d.ids-b.routes.p)/4+1
		}
		b.do(func() error {
			return b.k.RouterF32Mail(b.s, xp, w.p, bp, lp, d.ids, d.weights, done, cols, experts, k, mode, mail, tag)
		}, opRouterF32, u(xp), u(w.p), u(bp), u(lp), u(d.ids), u(d.weights), u(done), uint64(cols), uint64(experts), uint64(k), uint64(mode), u(mail), uint64(tag))
	})
	if mail != 0 {
		m.post(r, tag, xp, cols, b.step.queued)
	}
	b.q8.dropIfOverlaps(lp, 4*experts)
	return r
}

// routerDone is router_f32's counter: 4 zeroed bytes, allocated at the first use.
func (b *Backend) routerDone() cuda.DevicePtr {
	a := &b.routes
	if a.done != 0 {
		return a.done
	}
	b.step.brk()
	p, err := b.alloc(4, "router counter")
	if err == nil {
		err = b.s.Memset(p, 0, 4)
	}
	if err != nil {
		b.err.Set(fmt.Errorf("gpu: router counter: %w", err))
		return 0
	}
	a.done = p
	return p
}

// decodeRoute reserves one token's k slots of the decode arena and queues the routing
// (launch) into them; the Routes it returns are filled at the next Read.
func (b *Backend) decodeRoute(k int, launch func(d *devRoutes)) *compute.Routes {
	r := &compute.Routes{N: 1, K: k, IDs: make([]int32, k), Weights: make([]float32, k)}
	off, ok := b.routeSlots(k)
	if !ok {
		return r
	}
	a := &b.routes
	d := &devRoutes{owner: b, ids: a.p.Add(4 * off), weights: a.p.Add(4 * (a.cap + off)), gen: a.gen}
	launch(d)
	r.Dev = d
	a.pending = append(a.pending, pendingRoute{r: r, off: off})
	return r
}

// routeSlots reserves n slots of the arena, flushing it to the host when full and growing
// it when n alone does not fit.
func (b *Backend) routeSlots(n int) (int, bool) {
	a := &b.routes
	if a.used+n > a.cap {
		b.step.brk() // the flush downloads mid-step
		b.flushRoutes()
	}
	if n > a.cap {
		if b.mail != nil {
			// The places restart at 0: no router may still write a tag from the old ones.
			b.err.Set(b.Synchronize())
		}
		c := max(routeArenaSlots, 2*a.cap, n)
		p, err := b.alloc(8*c, "routing")
		if err != nil {
			b.err.Set(err)
			return 0, false
		}
		a.p, a.cap, a.used = p, c, 0 // the old arena stays allocated until Close (rare growth)
		a.gen++
	}
	off := a.used
	a.used += n
	return off, true
}

// flushRoutes downloads the pending routes (ids and the weights in use, one copy) into
// their host slices and recycles the arena. Callers mid-step end the step's graph first.
func (b *Backend) flushRoutes() {
	if fill := b.routeDownload(); fill != nil {
		b.err.Set(b.s.Synchronize())
		fill()
		b.synced()
	}
}

// routeDownload queues the pending routes' copy to the host (into the page-locked download
// area when it has room) and returns what fills their slices and recycles the arena once
// the stream has been waited for; nil, with the arena recycled, when none are pending.
func (b *Backend) routeDownload() func() {
	a := &b.routes
	if len(a.pending) == 0 {
		a.used = 0
		return nil
	}
	n := a.cap + a.used
	var raw []uint32
	var err error
	if area := b.down.take(b.ctx, 4*n); area != nil {
		raw = uint32sOf(area)
		err = b.s.CopyFromDevice(unsafe.Pointer(&area[0]), a.p, 4*n)
	} else {
		raw = make([]uint32, n)
		err = b.s.CopyFromDevice(unsafe.Pointer(&raw[0]), a.p, 4*n) // pageable: done on return
	}
	if err != nil {
		b.err.Set(fmt.Errorf("gpu: download routes: %w", err))
	}
	return func() {
		for _, pr := range a.pending {
			for i := range len(pr.r.IDs) {
				if err == nil {
					pr.r.IDs[i] = int32(raw[pr.off+i])
					pr.r.Weights[i] = math.Float32frombits(raw[a.cap+pr.off+i])
				}
			}
		}
		clear(a.pending)
		a.pending = a.pending[:0]
		a.used = 0
		a.gen++
	}
}

// deviceRoutes returns r's ids and weights in VRAM: RouterTopK's own buffers while they
// are live, else r's host copies uploaded to scratch (0, 0 on error, which is recorded).
func (b *Backend) deviceRoutes(r *compute.Routes, experts int) (ids, weights cuda.DevicePtr) {
	if d, ok := r.Dev.(*devRoutes); ok && d.owner == b && d.gen == b.routes.gen {
		return d.ids, d.weights
	}
	slots := r.N * r.K
	if len(r.IDs) < slots || len(r.Weights) < slots {
		b.err.Set(fmt.Errorf("gpu: moe: routes hold %d ids and %d weights for %d x %d slots", len(r.IDs), len(r.Weights), r.N, r.K))
		return 0, 0
	}
	if err := checkIDs(r.IDs[:slots], experts); err != nil {
		b.err.Set(err)
		return 0, 0
	}
	b.step.brk()
	ids = b.scratchBuf("moe ids", 4*slots)
	weights = b.scratchBuf("moe weights", 4*slots)
	if ids == 0 || weights == 0 {
		return 0, 0
	}
	b.err.Set(cuda.Upload(b.s, ids, r.IDs[:slots]))
	b.err.Set(cuda.Upload(b.s, weights, r.Weights[:slots]))
	return ids, weights
}

// checkIDs refuses expert ids outside [0, experts): the kernels would read past the tensor.
func checkIDs(ids []int32, experts int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= experts {
			return fmt.Errorf("gpu: moe: slot %d routes to expert %d of %d", i, id, experts)
		}
	}
	return nil
}
