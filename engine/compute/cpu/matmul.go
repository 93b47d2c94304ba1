package cpu

import (
	"fmt"
	"slices"

	"strata/engine/compute"
	"strata/engine/quant"
)

// grainRows is the fewest weight rows per task: enough work to amortise a handoff.
const grainRows = 16

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
	// All segments of one call share a row count in practice; index rows across them.
	starts := make([]int, len(segs)+1)
	for i, s := range segs {
		starts[i+1] = starts[i] + s.w.rows
	}
	b.pool.For(starts[len(segs)], grainRows, func(lo, hi int) {
		si := 0
		for i := lo; i < hi; {
			for starts[si+1] <= i {
				si++
			}
			s := &segs[si]
			r0 := i - starts[si]
			r1 := min(s.w.rows, r0+(hi-i))
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
			i += r1 - r0
		}
	})
}

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
