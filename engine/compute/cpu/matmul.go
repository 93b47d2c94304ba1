package cpu

import (
	"fmt"
	"slices"

	"strata/engine/compute"
	"strata/engine/quant"
)

// grainBytes is the least weight data per task: enough work to amortise a handoff and a
// new weight stream. On 16 threads, sixteen chunks a thread cut a layer's attention output
// projection (4.7 MB) into 18 KB pieces; at 64 KB, five passes of the H200's CPU, decode
// 35.4-37.4 -> 38.6-40.1 tok/s, the projections 15-20% faster (at 128 KB, even). A row
// count (16) did worse still for wide rows: the router's 8 KB rows made eight chunks, so
// eight of 16 threads read it. On two threads the projections keep their 32 chunks.
const grainBytes = 64 << 10

// MatMul computes dst[n x rows] = x[n x cols] · wᵀ.
func (b *Backend) MatMul(dst compute.Buf, wt compute.Weight, x compute.Buf, n int) {
	w := wt.(*Weight)
	b.matmulSegments([]segment{{w: w, expert: 0, xs: f32(x)[:n*w.cols], n: n, y: f32(dst)}})
}

// MatMuls runs products that share their input as one parallel pass.
func (b *Backend) MatMuls(dst []compute.Buf, ws []compute.Weight, x compute.Buf, n int) {
	segs := make([]segment, len(ws))
	for i, wt := range ws {
		w := wt.(*Weight)
		segs[i] = segment{w: w, expert: 0, xs: f32(x)[:n*w.cols], n: n, y: f32(dst[i])}
	}
	b.matmulSegments(segs)
}

// segment is one matrix product in a batch of them: the rows of one (expert) matrix times
// n activation rows, written to y with a row stride of the matrix's row count.
type segment struct {
	w      *Weight
	expert int
	xs     []float32 // n x cols (unused when acts comes set)
	n      int
	y      []float32          // n x rows
	acts   *quant.Activations // the quantised xs: set by the caller, or by matmulSegments
}

// matmulSegments runs several products as one parallel loop over all their rows, so a MoE
// layer's experts cost one pool handoff instead of one per expert.
func (b *Backend) matmulSegments(segs []segment) {
	if len(segs) == 0 {
		return
	}
	float := b.float
	if !float {
		made, ok := b.quantizeInputs(segs)
		defer b.releaseActs(made)
		float = !ok
	}
	// The loop runs over cost units, not rows, so its chunks carry similar work: a MoE
	// layer's experts range from one activation row to the whole batch and the popular ones
	// sit anywhere, so a chunk of equal rows could hold several times the average work and
	// be the one a thread runs alone at the end.
	starts := make([]int, len(segs)+1)
	widest := 1
	for i, s := range segs {
		starts[i+1] = starts[i] + s.w.rows*rowCost(s.n)
		widest = max(widest, s.w.rowBytes)
	}
	product := func(_ int, s *segment, r0, r1 int) {
		data := s.w.expert(s.expert)
		var err error
		if float {
			err = quant.MatMulFloat(s.w.typ, data, s.w.cols, s.xs, s.n, s.y, s.w.rows, r0, r1)
		} else {
			err = quant.MatMul(s.w.typ, data, s.w.cols, s.acts, s.y, s.w.rows, r0, r1)
		}
		if err != nil {
			b.err.Set(fmt.Errorf("cpu: matmul %q: %w", s.w.name, err))
		}
	}
	grainRows := max(1, grainBytes/widest)
	b.pool.For(starts[len(segs)], grainRows*rowCost(1), func(lo, hi int) {
		segmentRows(segs, starts, lo, hi, product)
	})
}

// segmentRows calls fn with the rows [r0, r1) of each segment (segs[i]) that the cost units [lo, hi)
// hold; starts[i] is the first unit of segs[i] (see matmulSegments). A row belongs to the
// range holding its first unit, so adjoining ranges split the rows without overlap.
func segmentRows(segs []segment, starts []int, lo, hi int, fn func(i int, s *segment, r0, r1 int)) {
	si, _ := slices.BinarySearch(starts, lo+1)
	for si--; si < len(segs) && starts[si] < hi; si++ {
		s := &segs[si]
		c := rowCost(s.n)
		r0 := ceilDiv(max(0, lo-starts[si]), c)
		r1 := min(s.w.rows, ceilDiv(hi-starts[si], c))
		if r0 < r1 {
			fn(si, s, r0, r1)
		}
	}
}

// rowCost is the work of one weight row against n activation rows, in units of one row's
// multiply: reading the row costs about two of those (Q4_K 768x2048 from DRAM, one Zen 3
// thread: 1 row 13.8, 2 rows 20.6, 64 rows 41 GMAC/s).
func rowCost(n int) int { return n + 2 }

// ceilDiv is ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// quantizeInputs sets the 8-bit activations of the segments that have none, quantising each
// distinct input once (an expert's gate and up share theirs), all rows in one parallel loop
// when there are many. It returns the activations it made, for release after the products,
// and reports false when a weight type has no integer kernel (the float path then runs).
func (b *Backend) quantizeInputs(segs []segment) ([]*quant.Activations, bool) {
	type key struct {
		x   *float32
		typ quant.Type
	}
	done := map[key]*quant.Activations{}
	var made []*quant.Activations
	var todo []*segment // the segments whose input is quantised here
	rows, work := 0, 0
	for i := range segs {
		s := &segs[i]
		if s.acts != nil {
			continue
		}
		k := key{&s.xs[0], s.w.typ}
		if a, ok := done[k]; ok {
			s.acts = a
			continue
		}
		a, err := b.activations(s.w.typ, s.w.cols, s.n)
		if err != nil {
			return made, false
		}
		made = append(made, a)
		s.acts, done[k] = a, a
		todo = append(todo, s)
		rows += s.n
		work += s.n * s.w.cols
	}
	// Row r of all inputs together: find its segment by the running row counts.
	starts := make([]int, len(todo)+1)
	for i, s := range todo {
		starts[i+1] = starts[i] + s.n
	}
	b.forWork(rows, work, func(lo, hi int) {
		si, _ := slices.BinarySearch(starts, lo+1)
		si-- // the last segment starting at or before lo
		for r := lo; r < hi; r++ {
			for starts[si+1] <= r {
				si++
			}
			s, i := todo[si], r-starts[si]
			b.err.Set(s.acts.Set(i, s.xs[i*s.w.cols:(i+1)*s.w.cols]))
		}
	})
	return made, true
}
