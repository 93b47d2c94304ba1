package cpu

import (
	"fmt"
	"math"
	"sync"

	"strata/engine/compute"
	"strata/engine/quant"
)

// The operations of compute.Hybrid: what Gated DeltaNet hybrids need beyond a plain MoE
// transformer. The delta rule itself is in deltarule.go.

var _ compute.Hybrid = (*Backend)(nil)

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func silu(x float32) float32 { return x * sigmoid(x) }

// softplus is log(1 + e^x), linear above 20 as torch's is.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// decoded holds a weight's values as float32, decoded once.
type decoded struct {
	once sync.Once
	vals []float32
	err  error
}

// floats returns w's values (all rows of the first matrix) as float32, decoding them on the
// first call (a conv's taps are read whole every step).
func (w *Weight) floats() ([]float32, error) {
	if w.vec != nil && w.rows == 1 {
		return w.vec, nil
	}
	w.decoded.once.Do(func() {
		w.decoded.vals = make([]float32, w.rows*w.cols)
		if err := quant.Dequantize(w.typ, w.expert(0), w.decoded.vals); err != nil {
			w.decoded.err = fmt.Errorf("tensor %q: %w", w.name, err)
		}
	})
	return w.decoded.vals, w.decoded.err
}

// CausalConv1D convolves each channel over time with its K taps, the state standing in for
// the K-1 inputs before the first row.
func (b *Backend) CausalConv1D(dst, x, state compute.Buf, wt compute.Weight, n int) {
	w := wt.(*Weight)
	C, K := w.rows, w.cols
	taps, err := w.floats()
	if err != nil {
		b.err.Set(fmt.Errorf("cpu: conv1d: %w", err))
		return
	}
	in, out, st := f32(x)[:n*C], f32(dst)[:n*C], f32(state)[:(K-1)*C]
	b.forWork(C, n*C*K, func(lo, hi int) {
		hist := make([]float32, K-1+n) // one channel's inputs over time, state first
		for c := lo; c < hi; c++ {
			for j := range K - 1 {
				hist[j] = st[j*C+c]
			}
			for t := range n {
				hist[K-1+t] = in[t*C+c]
			}
			tc := taps[c*K : (c+1)*K]
			for t := range n {
				var s float32
				for j, wj := range tc {
					s += wj * hist[t+j]
				}
				out[t*C+c] = s
			}
			for j := range K - 1 {
				st[j*C+c] = hist[n+j]
			}
		}
	})
}

// SiLU applies x·sigmoid(x) in place.
func (b *Backend) SiLU(x compute.Buf, n int) {
	d := f32(x)[:n]
	b.forWork(n, n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = silu(d[i])
		}
	})
}

// MulSigmoid gates dst by sigmoid(gate).
func (b *Backend) MulSigmoid(dst, gate compute.Buf, n int) {
	d, g := f32(dst)[:n], f32(gate)[:n]
	b.forWork(n, n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] *= sigmoid(g[i])
		}
	})
}

// GatedRMSNorm is rmsnorm(x)·w·silu(z) per row.
func (b *Backend) GatedRMSNorm(dst, x, z compute.Buf, wt compute.Weight, rows int, eps float32) {
	w := wt.(*Weight).vec
	dim := len(w)
	d, s, g := f32(dst)[:rows*dim], f32(x)[:rows*dim], f32(z)[:rows*dim]
	b.forWork(rows, rows*dim, func(lo, hi int) {
		rmsNormGo(d[lo*dim:hi*dim], s[lo*dim:hi*dim], w, hi-lo, eps)
		for i := lo * dim; i < hi*dim; i++ {
			d[i] *= silu(g[i])
		}
	})
}

// RoPENeoXPartial rotates the first rotDims values of each head, pairs (i, i+rotDims/2).
func (b *Backend) RoPENeoXPartial(x compute.Buf, n, heads, headDim, rotDims int, positions []int, base float32) {
	d := f32(x)
	half := rotDims / 2
	rt := b.ropeAngles(positions[:n], rotDims, base)
	b.forWork(n, n*heads*rotDims, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cos, sin := rt.cos[t*half:(t+1)*half], rt.sin[t*half:(t+1)*half]
			for h := range heads {
				v := d[(t*heads+h)*headDim : (t*heads+h)*headDim+rotDims]
				for i := range half {
					x0, x1 := v[i], v[i+half]
					v[i] = x0*cos[i] - x1*sin[i]
					v[i+half] = x1*cos[i] + x0*sin[i]
				}
			}
		}
	})
}

// SigmoidRoutes sends every token to expert 0 with weight sigmoid(logit).
func (b *Backend) SigmoidRoutes(logits compute.Buf, n int) *compute.Routes {
	l := f32(logits)[:n]
	r := &compute.Routes{N: n, K: 1, IDs: make([]int32, n), Weights: make([]float32, n)}
	for t, v := range l {
		r.Weights[t] = sigmoid(v)
	}
	return r
}
