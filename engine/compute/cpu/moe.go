package cpu

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"strata/engine/compute"
	"strata/engine/quant"
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
// run as one parallel loop, then all down products as another (one loop for both when
// decoding one token: expertsOneToken).
func (b *Backend) MoE(dst, x compute.Buf, gate, up, down compute.Weight, ffn *compute.ExpertFFN, r *compute.Routes) {
	G, U, Dn := gate.(*Weight), up.(*Weight), down.(*Weight)
	H, F := G.cols, G.rows
	var bias expertBiases
	if ffn != nil {
		var err error
		if bias, err = expertBiasesOf(ffn, G.exps, F, H); err != nil {
			b.err.Set(err)
			return
		}
	}
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
	defer b.populateExperts(G, U, Dn, experts, r.N)()

	// The integer path quantises each token row once and gathers the quantised rows into
	// the experts' batches; the float path gathers the float rows.
	var batches []expertActs
	gathered := false
	if !b.float {
		var made []*quant.Activations
		batches, made, gathered = b.gatherQuantised(G, U, xs, r, count, slot, row)
		defer b.releaseActs(made)
	}

	// Every buffer below is written in full before it is read, so one reused block serves
	// them all (a prefill step allocated and cleared ~12 MB per layer otherwise).
	size := routes * (2*F + H) // gate and up outputs, down outputs
	if !gathered {
		size += routes * H // the gathered float rows
	}
	sc := b.scratch(size)
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
		gu[2*j] = segment{w: G, expert: int(e), n: ne, y: carve(ne * F)}
		gu[2*j+1] = segment{w: U, expert: int(e), n: ne, y: carve(ne * F)}
		if gathered {
			gu[2*j].acts, gu[2*j+1].acts = batches[j].gate, batches[j].up
		} else {
			gu[2*j].xs = carve(ne * H)
			gu[2*j+1].xs = gu[2*j].xs
		}
		dn[j] = segment{w: Dn, expert: int(e), xs: gu[2*j].y, n: ne, y: carve(ne * H)}
	}
	if !gathered || r.N != 1 || !b.expertsOneToken(gu, dn, experts, ffn, bias) {
		b.expertsInTwoPasses(gu, dn, experts, ffn, bias, xs, r, slot, row, gathered)
	}

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
				y, i := dn[slot[k]].y, int(row[k])
				addScaled(o, r.Weights[k], y[i*H:(i+1)*H])
			}
		}
	})
}

// expertsInTwoPasses runs every expert's gate and up products as one parallel loop, the
// SwiGLU, then every down product as another (the float path gathers the input rows first).
func (b *Backend) expertsInTwoPasses(gu, dn []segment, experts []int32, ffn *compute.ExpertFFN, bias expertBiases, xs []float32, r *compute.Routes, slot, row []int32, gathered bool) {
	routes := len(r.IDs)
	H, F := dn[0].w.rows, gu[0].w.rows
	if !gathered {
		b.forWork(routes, routes*H, func(lo, hi int) {
			for k := lo; k < hi; k++ {
				t, i := k/r.K, int(row[k])
				copy(gu[2*slot[k]].xs[i*H:(i+1)*H], xs[t*H:(t+1)*H])
			}
		})
	}
	b.matmulSegments(gu)

	// SwiGLU in place of the gate output, which is the down product's input.
	b.forWork(len(experts), routes*F, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			if ffn == nil {
				swiGLU(gu[2*j].y, gu[2*j+1].y)
				continue
			}
			e := int(experts[j])
			addRows(gu[2*j].y, bias.gate(e), F)
			addRows(gu[2*j+1].y, bias.up(e), F)
			swiGLUClamped(gu[2*j].y, gu[2*j+1].y, ffn.Limit, ffn.Alpha)
		}
	})
	b.matmulSegments(dn)
	if ffn != nil {
		b.forWork(len(experts), routes*H, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				addRows(dn[j].y, bias.down(int(experts[j])), H)
			}
		})
	}
}

// expertsOneToken is expertsInTwoPasses for one token's experts in one parallel loop: the
// gate and up rows of every expert come first, then the down rows. Whoever finishes the
// last gate or up row of an expert runs its SwiGLU and quantises it for the down product,
// so the second hand-off, the first pass's tail and the serial SwiGLU between the passes
// go. Same operations on the same values as the two passes, so the same bits. It reports
// false, having done nothing, when the down inputs cannot be quantised (the two passes
// then run).
func (b *Backend) expertsOneToken(gu, dn []segment, experts []int32, ffn *compute.ExpertFFN, bias expertBiases) bool {
	F := gu[0].w.rows
	pending := make([]atomic.Int64, len(experts)) // gate and up rows left, per expert
	ready := make([]atomic.Bool, len(experts))
	done := make([]chan struct{}, len(experts)) // closed with ready, for a waiter that blocks
	made := make([]*quant.Activations, 0, len(experts))
	defer func() { b.releaseActs(made) }()
	for j := range experts {
		pending[j].Store(int64(2 * F))
		done[j] = make(chan struct{})
		a, err := b.activations(dn[j].w.typ, F, dn[j].n) // n > 1: the token routed there twice
		if err != nil {
			return false
		}
		made = append(made, a)
	}
	for j := range dn {
		dn[j].acts = made[j]
	}
	segs := append(slices.Clip(gu), dn...)
	starts := make([]int, len(segs)+1)
	widest := 1
	for i, s := range segs {
		starts[i+1] = starts[i] + s.w.rows*rowCost(s.n)
		widest = max(widest, s.w.rowBytes)
	}
	finish := func(j int) {
		g, u := gu[2*j].y, gu[2*j+1].y
		if ffn == nil {
			swiGLU(g, u)
		} else {
			e := int(experts[j])
			addRows(g, bias.gate(e), F)
			addRows(u, bias.up(e), F)
			swiGLUClamped(g, u, ffn.Limit, ffn.Alpha)
		}
		for i := range dn[j].n {
			b.err.Set(dn[j].acts.Set(i, g[i*F:(i+1)*F]))
		}
		ready[j].Store(true)
		close(done[j])
	}
	product := func(i int, s *segment, r0, r1 int) {
		j := i / 2
		if i >= len(gu) {
			j = i - len(gu)
			// The pool hands out chunks in ascending order, so every gate and up row was
			// claimed before this chunk by a goroutine that runs it without waiting: the wait
			// ends. It spins a little, then blocks: a spinner holds the CPU that the goroutine
			// it waits for may need (GOMAXPROCS=1, or other processes on the cores).
			if !ready[j].Load() && !spinUntil(&ready[j], readySpin) {
				<-done[j]
			}
		}
		if err := quant.MatMul(s.w.typ, s.w.expert(s.expert), s.w.cols, s.acts, s.y, s.w.rows, r0, r1); err != nil {
			b.err.Set(fmt.Errorf("cpu: matmul %q: %w", s.w.name, err))
		}
		if i < len(gu) && pending[j].Add(-int64(r1-r0)) == 0 {
			finish(j)
		}
	}
	grainRows := max(1, grainBytes/widest)
	b.pool.For(starts[len(segs)], grainRows*rowCost(1), func(lo, hi int) {
		segmentRows(segs, starts, lo, hi, product)
	})
	if ffn != nil {
		H := dn[0].w.rows
		for j := range dn {
			addRows(dn[j].y, bias.down(int(experts[j])), H)
		}
	}
	return true
}

// readySpin bounds how long a down product spins for its expert's SwiGLU before it blocks:
// about one chunk's time on two threads. A waiter that yielded (runtime.Gosched) instead
// made BenchmarkMoE/n=1 1.6x slower than the two passes on a 2-core VM beside a busy xz:
// it kept its core while the thread it waited for sat descheduled.
const readySpin = 50 * time.Microsecond

// spinUntil polls f for up to d, without yielding; it reports whether f became true.
func spinUntil(f *atomic.Bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for i := 1; !f.Load(); i++ {
		if i%256 == 0 && time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// expertActs is one expert's batch of quantised input rows for its gate and up products
// (one value when both have the same weight type).
type expertActs struct{ gate, up *quant.Activations }

// gatherQuantised quantises the r.N token rows of xs once per weight type of gate and up,
// then gathers each route's row into its expert's batch: expert j (of the ascending list)
// gets count[j] rows, and route k lands in row row[k] of expert slot[k]. Quantising every
// expert's copy instead cost eight times the work in decode. It returns the batches and
// every activation it made (for release), or ok false when a type has no integer kernel.
// With one token, the batches share its row.
func (b *Backend) gatherQuantised(G, U *Weight, xs []float32, r *compute.Routes, count []int, slot, row []int32) (batches []expertActs, made []*quant.Activations, ok bool) {
	H := G.cols
	gateSrc, err := b.activations(G.typ, H, r.N)
	if err != nil {
		return nil, nil, false
	}
	src := []*quant.Activations{gateSrc} // the distinct token activations
	upSrc := gateSrc
	if U.typ != G.typ {
		if upSrc, err = b.activations(U.typ, H, r.N); err != nil {
			return nil, src, false
		}
		src = append(src, upSrc)
	}
	made = append(made, src...)
	b.forWork(r.N*len(src), r.N*len(src)*H, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			t := k % r.N
			b.err.Set(src[k/r.N].Set(t, xs[t*H:(t+1)*H]))
		}
	})
	batches = make([]expertActs, len(count))
	if r.N == 1 && len(count) == len(r.IDs) {
		// Decode: every expert's batch is the one token's row; share it instead of copying.
		for j := range batches {
			batches[j] = expertActs{gate: gateSrc, up: upSrc}
		}
		return batches, made, true
	}
	for j, ne := range count {
		g, err := b.activations(G.typ, H, ne)
		if err != nil {
			return nil, made, false
		}
		made = append(made, g)
		u := g
		if U.typ != G.typ {
			if u, err = b.activations(U.typ, H, ne); err != nil {
				return nil, made, false
			}
			made = append(made, u)
		}
		batches[j] = expertActs{gate: g, up: u}
	}
	b.forWork(len(r.IDs), len(r.IDs)*H, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			t, e, i := k/r.K, batches[slot[k]], int(row[k])
			b.err.Set(e.gate.CopyRow(i, gateSrc, t))
			if e.up != e.gate {
				b.err.Set(e.up.CopyRow(i, upSrc, t))
			}
		}
	})
	return batches, made, true
}

// Route runs the reference router on the host (the logits already are there).
func (b *Backend) Route(logits compute.Buf, n, experts, k int, norm bool) *compute.Routes {
	return compute.RouteHost(f32(logits)[:n*experts], n, experts, k, norm)
}

// RouteTopK runs the reference top-k-then-softmax router on the host.
func (b *Backend) RouteTopK(logits compute.Buf, n, experts, k int) *compute.Routes {
	return compute.RouteHostTopK(f32(logits)[:n*experts], n, experts, k)
}
