package cpu

import (
	"fmt"
	"math"

	"strata/engine/compute"
)

// expertBiases are a layer's stacked expert biases as floats; a nil stack reads as zeros.
type expertBiases struct {
	g, u, d []float32 // experts x F, experts x F, experts x H
	f, h    int
}

func (e expertBiases) gate(x int) []float32 { return part(e.g, x, e.f) }
func (e expertBiases) up(x int) []float32   { return part(e.u, x, e.f) }
func (e expertBiases) down(x int) []float32 { return part(e.d, x, e.h) }

func part(v []float32, x, n int) []float32 {
	if v == nil {
		return nil
	}
	return v[x*n : (x+1)*n]
}

// expertBiasesOf checks ffn's biases against experts of f hidden and h output values.
func expertBiasesOf(ffn *compute.ExpertFFN, experts, f, h int) (expertBiases, error) {
	e := expertBiases{f: f, h: h}
	for _, p := range []struct {
		w   compute.Weight
		dst *[]float32
		n   int
	}{{ffn.GateBias, &e.g, f}, {ffn.UpBias, &e.u, f}, {ffn.DownBias, &e.d, h}} {
		if p.w == nil {
			continue
		}
		w := p.w.(*Weight)
		if w.rows != 1 || w.cols != p.n || w.exps != experts {
			return e, fmt.Errorf("cpu: expert bias %q is %d x %d x %d, want %d experts of %d", w.name, w.exps, w.rows, w.cols, experts, p.n)
		}
		*p.dst = w.vec
	}
	return e, nil
}

// addRows adds bias (nil: nothing) to each row of y, rows of len(bias) values.
func addRows(y, bias []float32, n int) {
	if bias == nil {
		return
	}
	for r := 0; r+n <= len(y); r += n {
		row := y[r : r+n]
		for i, v := range bias {
			row[i] += v
		}
	}
}

// swiGLUClamped is gpt-oss's activation in place of g: g = min(g, limit),
// u = clamp(u, -limit, limit), g * sigmoid(alpha*g) * (u + 1); with no limit, plain SwiGLU.
func swiGLUClamped(g, u []float32, limit, alpha float32) {
	if limit <= 0 {
		swiGLU(g, u)
		return
	}
	for i, v := range g {
		v = min(v, limit)
		w := max(min(u[i], limit), -limit)
		g[i] = v / (1 + float32(math.Exp(float64(-alpha*v)))) * (w + 1)
	}
}
