package gpu

import (
	"fmt"
	"math"

	"strata/cuda"
	"strata/engine/compute"
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
}

type pendingRoute struct {
	r   *compute.Routes
	off int
}

// routerTopKFits reports whether RouterTopK takes this shape (one warp per token, the
// probabilities in 48 KiB of shared memory, at most 32 experts per token).
func routerTopKFits(experts, k int) bool {
	return k > 0 && k <= 32 && k <= experts && experts*4 <= 48*1024
}

// RouteTopK is Route with renormalisation: the top k of a softmax over all experts,
// renormalised, are a softmax over the k largest logits (the same order, the same ties).
func (b *Backend) RouteTopK(logits compute.Buf, n, experts, k int) *compute.Routes {
	return b.Route(logits, n, experts, k, true)
}

// Route runs the router on the device. A single token's ids and weights stay in VRAM for
// the MoE that follows (no synchronisation) and reach the host at the next Read; a batch is
// downloaded at once, since grouping its rows by expert happens on the host.
func (b *Backend) Route(logits compute.Buf, n, experts, k int, norm bool) *compute.Routes {
	if !routerTopKFits(experts, k) {
		b.step.brk()
		host := make([]float32, n*experts)
		b.err.Set(cuda.Download(b.s, host, dev(logits)))
		return compute.RouteHost(host, n, experts, k, norm)
	}
	slots := n * k
	r := &compute.Routes{N: n, K: k, IDs: make([]int32, slots), Weights: make([]float32, slots)}
	if n > 1 {
		b.step.brk()
		ids := b.scratchBuf("route ids", 4*slots)
		ws := b.scratchBuf("route weights", 4*slots)
		if ids == 0 || ws == 0 {
			return r // the allocation error is recorded
		}
		if err := b.k.RouterTopK(b.s, dev(logits), ids, ws, n, experts, k, norm); err != nil {
			b.err.Set(fmt.Errorf("gpu: route %d tokens: %w", n, err))
			return r
		}
		b.err.Set(cuda.Download(b.s, r.IDs, ids))
		b.err.Set(cuda.Download(b.s, r.Weights, ws))
		return r
	}
	off, ok := b.routeSlots(slots)
	if !ok {
		return r
	}
	a := &b.routes
	d := &devRoutes{owner: b, ids: a.p.Add(4 * off), weights: a.p.Add(4 * (a.cap + off)), gen: a.gen}
	lp, renorm := dev(logits), uint64(0)
	if norm {
		renorm = 1
	}
	b.do(func() error { return b.k.RouterTopK(b.s, lp, d.ids, d.weights, n, experts, k, norm) },
		opRoute, u(lp), u(d.ids), u(d.weights), uint64(n), uint64(experts), uint64(k), renorm)
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
	a := &b.routes
	if len(a.pending) == 0 {
		a.used = 0
		return
	}
	raw := make([]uint32, a.cap+a.used)
	err := cuda.Download(b.s, raw, a.p)
	if err != nil {
		b.err.Set(fmt.Errorf("gpu: download routes: %w", err))
	}
	for _, pr := range a.pending {
		n := len(pr.r.IDs)
		for i := range n {
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
