package cpu

import (
	"slices"

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
// run as one parallel loop, then all down products as another.
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
