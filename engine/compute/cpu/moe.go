package cpu

import (
	"slices"

	"strata/engine/compute"
)

// serialWork is the most element operations a host loop (gather, SwiGLU, combine,
// quantising inputs) runs on the caller alone; above it the loop is split over the pool.
// Decode stays below it (a pool handoff costs more than such a loop), prefill above.
const serialWork = 1 << 16

// forWork runs fn over [0, n) on the caller when work (element operations in all) is
// small, else over the pool.
func (b *Backend) forWork(n, work int, fn func(lo, hi int)) {
	if work < serialWork {
		fn(0, n)
		return
	}
	b.pool.For(n, 1, fn)
}

// MoE adds each token's routed experts, weighted, to dst. Tokens are grouped by expert so each
// expert's weights are read once per call (prefill), and all experts' gate and up products
// run as one parallel loop, then all down products as another.
func (b *Backend) MoE(dst, x compute.Buf, gate, up, down compute.Weight, r *compute.Routes) {
	G, U, Dn := gate.(*Weight), up.(*Weight), down.(*Weight)
	H, F := G.cols, G.rows
	xs, out := f32(x), f32(dst)

	// The experts in use, ascending, and where each route's row lands in its expert's batch.
	experts := slices.Clone(r.IDs)
	slices.Sort(experts)
	experts = slices.Compact(experts)
	count := make([]int, len(experts))
	slot := make([]int32, len(r.IDs)) // route -> index into experts
	row := make([]int32, len(r.IDs))  // route -> row in that expert's batch
	for k, e := range r.IDs {
		j, _ := slices.BinarySearch(experts, e)
		slot[k], row[k] = int32(j), int32(count[j])
		count[j]++
	}
	routes := len(r.IDs)

	// Every buffer below is written in full before it is read, so one reused block serves
	// them all (a prefill step allocated and cleared ~12 MB per layer otherwise).
	sc := b.scratch(routes * 2 * (H + F))
	defer b.release(sc)
	space := *sc
	carve := func(n int) []float32 {
		s := space[:n:n]
		space = space[n:]
		return s
	}
	gu := make([]segment, 2*len(experts))
	dn := make([]segment, len(experts))
	for j, e := range experts {
		ne := count[j]
		gu[2*j] = segment{w: G, expert: int(e), xs: carve(ne * H), n: ne, y: carve(ne * F)}
		gu[2*j+1] = segment{w: U, expert: int(e), xs: gu[2*j].xs, n: ne, y: carve(ne * F)}
		dn[j] = segment{w: Dn, expert: int(e), xs: gu[2*j].y, n: ne, y: carve(ne * H)}
	}
	b.forWork(routes, routes*H, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			t, i := k/r.K, int(row[k])
			copy(gu[2*slot[k]].xs[i*H:(i+1)*H], xs[t*H:(t+1)*H])
		}
	})
	b.matmulSegments(gu)

	// SwiGLU in place of the gate output, which is the down product's input.
	b.forWork(len(experts), routes*F, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			swiGLU(gu[2*j].y, gu[2*j+1].y)
		}
	})
	b.matmulSegments(dn)

	// Each token adds its experts' outputs in ascending expert order (the same order
	// whatever the batch, so decode and prefill agree).
	b.forWork(r.N, routes*H, func(lo, hi int) {
		order := make([]int, r.K)
		for t := lo; t < hi; t++ {
			ks := order[:0]
			for k := t * r.K; k < (t+1)*r.K; k++ {
				ks = append(ks, k)
			}
			slices.SortStableFunc(ks, func(a, b int) int { return int(slot[a]) - int(slot[b]) })
			o := out[t*H : (t+1)*H]
			for _, k := range ks {
				y, w, i := dn[slot[k]].y, r.Weights[k], int(row[k])
				for c, v := range y[i*H : (i+1)*H] {
					o[c] += w * v
				}
			}
		}
	})
}

// Route runs the reference router on the host (the logits already are there).
func (b *Backend) Route(logits compute.Buf, n, experts, k int, norm bool) *compute.Routes {
	return compute.RouteHost(f32(logits)[:n*experts], n, experts, k, norm)
}
