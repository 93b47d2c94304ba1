package synth

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"strata/engine/quant"
)

// The drift. Every token's stream carries u (see dcAmplitude), so every attention head's
// context mean and every expert's output hold a part that is the same for all tokens; the
// layers add these parts up, and a router sees their sum as a popularity of its own:
// balanced on the embeddings alone, a 24-layer synth asked for 40% measured 42% at layer 0
// and 48-54% from layer 19. The balance follows each reference token's stream through the
// layers (attention as the context mean of its values, the same for every token; the
// experts its router picks, on its own input) and balances each router on the streams
// there. The hybrids' Gated DeltaNet layers are not followed: their routers see the
// embeddings.

// driftState is each reference token's stream before the next layer's router is
// balanced. Routers are written in layer order, one at a time; next guards against any
// other order.
type driftState struct {
	mu      sync.Mutex
	next    int         // the layer whose router is balanced next
	streams [][]float32 // each distinct token's residual stream there
}

// tensorByName returns the plan entry of the tensor called name.
func (g *generator) tensorByName(name string) (tensorPlan, bool) {
	i := slices.IndexFunc(g.tensors, func(t tensorPlan) bool { return t.name == name })
	if i < 0 {
		return tensorPlan{}, false
	}
	return g.tensors[i], true
}

// readRows returns rows [first, first+n) of the tensor called name, as the file holds them,
// one row after another.
func (g *generator) readRows(name string, first, n int) ([]float32, error) {
	t, ok := g.tensorByName(name)
	if !ok {
		return nil, fmt.Errorf("synth: no tensor %s", name)
	}
	rowBytes, err := quant.RowBytes(t.typ, t.rowLen())
	if err != nil {
		return nil, err
	}
	out := make([]float32, n*t.rowLen())
	buf := make([]byte, t.unitRows*rowBytes)
	for u := first / t.unitRows; u*t.unitRows < first+n; u++ {
		if err := g.fillUnit(t, u, buf); err != nil {
			return nil, fmt.Errorf("synth: %s unit %d: %w", name, u, err)
		}
		lo, hi := max(first, u*t.unitRows), min(first+n, (u+1)*t.unitRows, t.rows())
		src := buf[(lo-u*t.unitRows)*rowBytes : (hi-u*t.unitRows)*rowBytes]
		if err := quant.Dequantize(t.typ, src, out[(lo-first)*t.rowLen():(hi-first)*t.rowLen()]); err != nil {
			return nil, fmt.Errorf("synth: %s rows %d..%d: %w", name, lo, hi, err)
		}
	}
	return out, nil
}

// readVector returns the whole tensor called name, or nil when the file has none.
func (g *generator) readVector(name string) ([]float32, error) {
	t, ok := g.tensorByName(name)
	if !ok {
		return nil, nil
	}
	return g.readRows(name, 0, t.rows())
}

// matVec is rows (n rows of len(x)) times x, plus bias when there is one.
func matVec(rows, x, bias []float32) []float32 {
	out := make([]float32, len(rows)/len(x))
	for i := range out {
		out[i] = float32(dot(rows[i*len(x):(i+1)*len(x)], x))
		if bias != nil {
			out[i] += bias[i]
		}
	}
	return out
}

// streamInputs returns each reference token's stream RMS-normalised and scaled by the norm
// weights norm: what a layer's attention or router reads.
func (b *balance) streamInputs(norm []float32, eps float64) [][]float32 {
	out := make([][]float32, len(b.streams))
	for t, x := range b.streams {
		x = slices.Clone(x)
		rmsNormalize(x, eps)
		for j := range x {
			x[j] *= norm[j]
		}
		out[t] = x
	}
	return out
}

// addToStreams adds the part d, shared by every token, to the streams.
func (b *balance) addToStreams(d []float32) {
	for _, x := range b.streams {
		for j := range x {
			x[j] += d[j]
		}
	}
}

// meanInput is the count-weighted mean of inputs.
func (b *balance) meanInput(inputs [][]float32) []float32 {
	m := make([]float32, len(inputs[0]))
	var total float64
	for t, x := range inputs {
		for j := range m {
			m[j] += float32(b.count[t]) * x[j]
		}
		total += b.count[t]
	}
	for j := range m {
		m[j] /= float32(total)
	}
	return m
}

// attentionDrift is what layer l's attention adds to every token alike: its output on the
// mean of its values, the context mean a nearly even head returns. The hybrids' layers
// add nothing here.
func (g *generator) attentionDrift(l int) ([]float32, error) {
	s := g.spec
	b := fmt.Sprintf("blk.%d.", l)
	if _, ok := g.tensorByName(b + "attn_v.weight"); !ok || IsHybrid(s.Arch) {
		return make([]float32, s.Hidden), nil
	}
	norm, err := g.readVector(b + "attn_norm.weight")
	if err != nil {
		return nil, err
	}
	mean := g.bal.meanInput(g.bal.streamInputs(norm, s.RMSEps))
	v, err := g.linear(b+"attn_v", s.KVHeads*s.HeadDim, mean)
	if err != nil {
		return nil, err
	}
	perKV := s.Heads / s.KVHeads
	heads := make([]float32, s.Heads*s.HeadDim) // each query head gets its kv head's values
	for h := range s.Heads {
		copy(heads[h*s.HeadDim:(h+1)*s.HeadDim], v[h/perKV*s.HeadDim:])
	}
	return g.linear(b+"attn_output", s.Hidden, heads)
}

// linear applies the matrix prefix.weight (outputs rows) and its bias prefix.bias, if any.
func (g *generator) linear(prefix string, outputs int, x []float32) ([]float32, error) {
	w, err := g.readRows(prefix+".weight", 0, outputs)
	if err != nil {
		return nil, err
	}
	bias, err := g.readVector(prefix + ".bias")
	if err != nil {
		return nil, err
	}
	return matVec(w, x, bias), nil
}

// routes are the picks of a layer's router for the reference tokens: per expert, the
// tokens it gets and the router weight of each.
type routes struct {
	tokens  [][]int
	weights [][]float64
}

// route sends the reference tokens' inputs through the router rows (bias-free, as skewed
// routers are): the top used logits, weighted by a softmax over them.
func (b *balance) route(rows, inputs [][]float32) routes {
	r := routes{tokens: make([][]int, len(rows)), weights: make([][]float64, len(rows))}
	logits := make([]float64, len(rows))
	top := make([]int, 0, b.used)
	for t, x := range inputs {
		for e, w := range rows {
			logits[e] = dot(w, x)
		}
		top = topK(logits, b.used, top)
		var sum float64
		for _, e := range top {
			sum += math.Exp(logits[e] - logits[top[0]])
		}
		for _, e := range top {
			r.tokens[e] = append(r.tokens[e], t)
			r.weights[e] = append(r.weights[e], math.Exp(logits[e]-logits[top[0]])/sum)
		}
	}
	return r
}

// addExperts adds layer l's expert outputs to each reference token's stream: the experts
// its router rows pick for it on its input, weighted as the router weighs them. The
// hybrids' are left out (their shared expert too).
func (g *generator) addExperts(l int, rows, inputs [][]float32) error {
	s := g.spec
	if IsHybrid(s.Arch) {
		return nil
	}
	r := g.bal.route(rows, inputs)
	b := fmt.Sprintf("blk.%d.ffn_", l)
	var biases [3][]float32 // gpt-oss's, of gate, up and down, all experts
	for i, name := range expertTensors() {
		var err error
		if biases[i], err = g.readVector(b + name + ".bias"); err != nil {
			return err
		}
	}
	outs := make([][][]float32, s.Experts) // per expert, per token it gets
	err := parallelFor(g.workers, s.Experts, func(e int) error {
		if len(r.tokens[e]) == 0 {
			return nil
		}
		var err error
		outs[e], err = g.expertOutputs(l, e, r.tokens[e], inputs, biases)
		return err
	})
	if err != nil {
		return err
	}
	for e, perToken := range outs {
		for i, out := range perToken {
			x, w := g.bal.streams[r.tokens[e][i]], float32(r.weights[e][i])
			for j := range x {
				x[j] += w * out[j]
			}
		}
	}
	return nil
}

// expertTensors are the names of the experts' projections after "blk.N.ffn_": gate, up,
// down.
func expertTensors() [3]string { return [3]string{"gate_exps", "up_exps", "down_exps"} }

// expertOutputs is expert e of layer l on the inputs of tokens: down(act(gate·x, up·x)),
// with the biases (all experts', nil where the file has none) and gpt-oss's clamped SwiGLU.
func (g *generator) expertOutputs(l, e int, tokens []int, inputs [][]float32, biases [3][]float32) ([][]float32, error) {
	s := g.spec
	b := fmt.Sprintf("blk.%d.ffn_", l)
	var w, bias [3][]float32 // gate, up, down
	for i, name := range expertTensors() {
		n := s.ExpertFFN
		if i == 2 {
			n = s.Hidden
		}
		var err error
		if w[i], err = g.readRows(b+name+".weight", e*n, n); err != nil {
			return nil, err
		}
		if biases[i] != nil {
			bias[i] = biases[i][e*n : (e+1)*n]
		}
	}
	outs := make([][]float32, len(tokens))
	for i, t := range tokens {
		x := inputs[t]
		act := expertActivation(s.Arch, matVec(w[0], x, bias[0]), matVec(w[1], x, bias[1]))
		outs[i] = matVec(w[2], act, bias[2])
	}
	return outs, nil
}

// expertActivation is the gated activation of arch's experts: SiLU(gate)·up, or gpt-oss's
// clamped SwiGLU (limits and alpha as engine/model's).
func expertActivation(arch string, gate, up []float32) []float32 {
	const limit, alpha = 7, 1.702
	out := make([]float32, len(gate))
	for i, gv := range gate {
		g, u := float64(gv), float64(up[i])
		if arch == "gpt-oss" {
			g = min(g, limit)
			u = max(min(u, limit), -limit) + 1
			out[i] = float32(g / (1 + math.Exp(-alpha*g)) * u)
			continue
		}
		out[i] = float32(g / (1 + math.Exp(-g)) * u)
	}
	return out
}
