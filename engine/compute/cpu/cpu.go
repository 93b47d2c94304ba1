// Package cpu is the CPU implementation of compute.Backend: weights stay in the model file's
// mapping, activations are float32 slices, and every heavy loop is split over one fixed pool.
package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"strata/engine/compute"
	"strata/engine/kv"
	"strata/engine/parallel"
	"strata/engine/quant"
)

// Options of the CPU backend.
type Options struct {
	Threads int // 0 = one per CPU Go runs goroutines on (GOMAXPROCS)
	// FloatPath dequantises weight rows and computes in float32 (the reference for tests)
	// instead of quantising activations to 8 bits for integer dot products.
	FloatPath bool
}

// Backend is the CPU backend.
type Backend struct {
	pool  *parallel.Pool
	float bool
	err   compute.StickyErr
	spare sync.Pool // *[]float32 scratch for the MoE's per-expert buffers
	acts  sync.Pool // *quant.Activations, reused by the products (see activations)
	rope  atomic.Pointer[ropeTable]
	ropeF atomic.Pointer[ropeFreqTable] // RoPE's, beside RoPENeoX's
	// populate: a decode step's MoE reads its routed experts' pages in from a goroutine (see
	// SetPopulateExperts).
	populate atomic.Bool
}

// scratch returns at least n floats of reused, uninitialised memory; release gives it back.
func (b *Backend) scratch(n int) *[]float32 {
	if s, ok := b.spare.Get().(*[]float32); ok && cap(*s) >= n {
		*s = (*s)[:n]
		return s
	}
	s := make([]float32, n)
	return &s
}

func (b *Backend) release(s *[]float32) { b.spare.Put(s) }

// activations returns room for n rows of cols values quantised for weights of type typ,
// reusing the buffers of released ones; releaseActs gives them back.
func (b *Backend) activations(typ quant.Type, cols, n int) (*quant.Activations, error) {
	a, ok := b.acts.Get().(*quant.Activations)
	if !ok {
		a = new(quant.Activations)
	}
	if err := a.Reset(typ, cols, n); err != nil {
		b.acts.Put(a)
		return nil, err
	}
	return a, nil
}

func (b *Backend) releaseActs(as []*quant.Activations) {
	for _, a := range as {
		b.acts.Put(a)
	}
}

// Err returns and clears the first error since the last call.
func (b *Backend) Err() error { return b.err.Take() }

// New starts the CPU backend's worker pool.
func New(o Options) *Backend {
	return &Backend{pool: parallel.NewPool(o.Threads), float: o.FloatPath}
}

// Name says which kernels run.
func (b *Backend) Name() string {
	if b.float {
		return "cpu (float reference)"
	}
	return "cpu (" + quant.CPUFeatures() + ")"
}

// Threads is the pool size.
func (b *Backend) Threads() int { return b.pool.Size() }

// Pool exposes the worker pool, for expert code that runs beside the backend.
func (b *Backend) Pool() *parallel.Pool { return b.pool }

// Close stops the workers.
func (b *Backend) Close() error { b.pool.Close(); return nil }

type buf []float32

func (x buf) Len() int { return len(x) }

func f32(x compute.Buf) []float32 { return x.(buf) }

// NewBuf allocates n floats.
func (b *Backend) NewBuf(n int) compute.Buf { return buf(make([]float32, n)) }

// Write copies host floats in.
func (b *Backend) Write(dst compute.Buf, src []float32) { copy(f32(dst), src) }

// Read copies floats out.
func (b *Backend) Read(src compute.Buf, dst []float32) { copy(dst, f32(src)) }

// Copy moves n values between bufs.
func (b *Backend) Copy(dst compute.Buf, dstOff int, src compute.Buf, srcOff int, n int) {
	copy(f32(dst)[dstOff:dstOff+n], f32(src)[srcOff:srcOff+n])
}

// Weight is a tensor in the model file's mapping.
type Weight struct {
	name             string
	typ              quant.Type
	rows, cols, exps int
	rowBytes         int
	stride           int // bytes from one expert to the next
	data             []byte
	vec              []float32 // decoded values of a one-row tensor (norm weights, biases; every expert's of a stack)
	decoded          *decoded  // all values, decoded on first use by ops that read a small matrix whole
}

func (w *Weight) Name() string     { return w.name }
func (w *Weight) Type() quant.Type { return w.typ }
func (w *Weight) Rows() int        { return w.rows }
func (w *Weight) Cols() int        { return w.cols }
func (w *Weight) Experts() int     { return w.exps }
func (w *Weight) expert(e int) []byte {
	return w.data[e*w.stride : e*w.stride+w.rows*w.rowBytes]
}

// Data is the weight's bytes (all experts of a stacked tensor).
func (w *Weight) Data() []byte { return w.data }

// ExpertBytes is expert e's matrix of a stacked tensor.
func (w *Weight) ExpertBytes(e int) []byte { return w.expert(e) }

// SetExpert replaces expert e's matrix of a stacked tensor (an expert cache's slot), with
// the decoded vector of a one-row stack (a bias) kept in step.
func (w *Weight) SetExpert(e int, data []byte) error {
	if e < 0 || e >= w.exps || len(data) != w.rows*w.rowBytes {
		return fmt.Errorf("cpu: %s: write of %d bytes to expert %d of %d", w.name, len(data), e, w.exps)
	}
	copy(w.expert(e), data)
	if w.vec != nil {
		if err := quant.Dequantize(w.typ, w.expert(e), w.vec[e*w.cols:(e+1)*w.cols]); err != nil {
			return fmt.Errorf("cpu: %s: %w", w.name, err)
		}
	}
	return nil
}

// NewWeight wraps bytes of the model file as a weight, checking the size.
func NewWeight(spec compute.WeightSpec) (*Weight, error) {
	exps := max(spec.Experts, 1)
	rb, err := quant.RowBytes(spec.Type, spec.Cols)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", spec.Name, err)
	}
	_, stride, err := spec.CheckSize(rb)
	if err != nil {
		return nil, err
	}
	w := &Weight{name: spec.Name, typ: spec.Type, rows: spec.Rows, cols: spec.Cols, exps: exps, rowBytes: rb, stride: stride, data: spec.Data, decoded: new(decoded)}
	if spec.Rows == 1 {
		w.vec = make([]float32, spec.Cols*exps)
		for e := range exps {
			if err := quant.Dequantize(spec.Type, w.expert(e), w.vec[e*spec.Cols:(e+1)*spec.Cols]); err != nil {
				return nil, fmt.Errorf("tensor %q: %w", spec.Name, err)
			}
		}
	}
	return w, nil
}

// Place wraps a tensor; the CPU reads weights where they are.
func (b *Backend) Place(spec compute.WeightSpec) (compute.Weight, error) { return NewWeight(spec) }

// NewKV allocates a host KV cache.
func (b *Backend) NewKV(spec compute.KVSpec) (compute.KV, error) {
	t, err := kv.ParseType(spec.Type)
	if err != nil {
		return nil, err
	}
	return kv.NewKept(spec.Layers, spec.KVHeads, spec.HeadDim, spec.Positions, t, spec.Keep)
}

// Embed dequantises the table rows of ids.
func (b *Backend) Embed(dst compute.Buf, table compute.Weight, ids []int) error {
	w := table.(*Weight)
	d := f32(dst)
	for i, id := range ids {
		if id < 0 || id >= w.rows {
			return fmt.Errorf("cpu: embed %q: token id %d outside [0, %d)", w.name, id, w.rows)
		}
		row := w.data[id*w.rowBytes : (id+1)*w.rowBytes]
		if err := quant.Dequantize(w.typ, row, d[i*w.cols:(i+1)*w.cols]); err != nil {
			return fmt.Errorf("cpu: embed %q: %w", w.name, err)
		}
	}
	return nil
}

// RMSNorm normalises rows of len(w) values.
func (b *Backend) RMSNorm(dst, x compute.Buf, wt compute.Weight, rows int, eps float32) {
	w := wt.(*Weight).vec
	d, s := f32(dst), f32(x)
	dim := len(w)
	b.forWork(rows, rows*dim, func(lo, hi int) {
		rmsNorm(d[lo*dim:hi*dim], s[lo*dim:hi*dim], w, hi-lo, eps)
	})
}

// Add accumulates x into dst.
func (b *Backend) Add(dst, x compute.Buf, n int) {
	d, s := f32(dst), f32(x)
	b.forWork(n, n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] += s[i]
		}
	})
}

// RoPENeoX rotates element i with element i+headDim/2 of every head.
func (b *Backend) RoPENeoX(x compute.Buf, n, heads, headDim int, positions []int, base float32) {
	d := f32(x)
	half := headDim / 2
	rt := b.ropeAngles(positions[:n], headDim, base)
	b.forWork(n, n*heads*headDim, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cos, sin := rt.cos[t*half:(t+1)*half], rt.sin[t*half:(t+1)*half]
			for h := range heads {
				v := d[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
				for i := range half {
					x0, x1 := v[i], v[i+half]
					v[i] = x0*cos[i] - x1*sin[i]
					v[i+half] = x1*cos[i] + x0*sin[i]
				}
			}
		}
	})
}

// ropeTable holds the rotation of every (position, frequency) pair of a step. Every layer
// rotates q and k at the same positions, so the step computes it once, not 2 x layers
// times (the pow, cos and sin were ~1% of a decode step).
type ropeTable struct {
	positions []int
	headDim   int
	base      float32
	cos, sin  []float32 // len(positions) x headDim/2
}

// ropeAngles returns the table for positions, reusing the last one when it matches. Tables
// are never changed once built, so concurrent steps at most build their own.
func (b *Backend) ropeAngles(positions []int, headDim int, base float32) *ropeTable {
	if t := b.rope.Load(); t != nil && t.headDim == headDim && t.base == base && slices.Equal(t.positions, positions) {
		return t
	}
	half := headDim / 2
	t := &ropeTable{positions: slices.Clone(positions), headDim: headDim, base: base,
		cos: make([]float32, len(positions)*half), sin: make([]float32, len(positions)*half)}
	for i := range half {
		// inv_freq in float32 as transformers computes it; the angle below in float64.
		f := float32(1 / math.Pow(float64(base), float64(2*i)/float64(headDim)))
		for p, pos := range positions {
			a := float64(pos) * float64(f)
			t.cos[p*half+i], t.sin[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	b.rope.Store(t)
	return t
}

// RoPE rotates element i with element i+len(r.InvFreq) of every head, each pair by
// position*InvFreq[i], with cos and sin times r.Scale.
func (b *Backend) RoPE(x compute.Buf, n, heads, headDim int, positions []int, r *compute.Rope) {
	d := f32(x)
	half := len(r.InvFreq)
	if 2*half > headDim {
		b.err.Set(fmt.Errorf("cpu: rope of %d frequencies over heads of %d values", half, headDim))
		return
	}
	rt := b.ropeFreqAngles(positions[:n], r)
	b.forWork(n, n*heads*headDim, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cos, sin := rt.cos[t*half:(t+1)*half], rt.sin[t*half:(t+1)*half]
			for h := range heads {
				v := d[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
				for i := range half {
					x0, x1 := v[i], v[i+half]
					v[i] = x0*cos[i] - x1*sin[i]
					v[i+half] = x1*cos[i] + x0*sin[i]
				}
			}
		}
	})
}

// ropeFreqTable is ropeTable for RoPE: the rotations of a step's positions by one Rope.
type ropeFreqTable struct {
	positions []int
	rope      *compute.Rope
	cos, sin  []float32
}

// ropeFreqAngles returns the table for positions and r, reusing the last one when both match
// (the model keeps one Rope, so its pointer says the frequencies are the same).
func (b *Backend) ropeFreqAngles(positions []int, r *compute.Rope) *ropeFreqTable {
	if t := b.ropeF.Load(); t != nil && t.rope == r && slices.Equal(t.positions, positions) {
		return t
	}
	half := len(r.InvFreq)
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	t := &ropeFreqTable{positions: slices.Clone(positions), rope: r,
		cos: make([]float32, len(positions)*half), sin: make([]float32, len(positions)*half)}
	for i, f := range r.InvFreq {
		for p, pos := range positions {
			// The angle in float32, as transformers multiplies it; cos and sin of it in float64.
			a := float64(float32(pos) * f)
			t.cos[p*half+i], t.sin[p*half+i] = float32(math.Cos(a))*scale, float32(math.Sin(a))*scale
		}
	}
	b.ropeF.Store(t)
	return t
}

// AddBias adds the bias vector to every row of x.
func (b *Backend) AddBias(x compute.Buf, bias compute.Weight, rows int) {
	w := bias.(*Weight).vec
	if w == nil {
		b.err.Set(fmt.Errorf("cpu: bias %q is not a vector", bias.Name()))
		return
	}
	d, dim := f32(x), len(w)
	b.forWork(rows, rows*dim, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := d[r*dim : (r+1)*dim]
			for i, v := range w {
				row[i] += v
			}
		}
	})
}

// StoreKV writes keys and values into the host cache.
func (b *Backend) StoreKV(c compute.KV, layer, pos0, n int, k, v compute.Buf) {
	c.(*kv.Cache).Store(layer, pos0, n, f32(k), f32(v))
}
