package gpu_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/gpu"
	"strata/engine/quant"
	"strata/engine/synth"
)

// TestRouteMatchesHost compares the device router (decode: ids filled at the next Read;
// batch: at once) with compute.RouteHost on random logits.
func TestRouteMatchesHost(t *testing.T) {
	b := newGPU(t)
	rng := rand.New(rand.NewPCG(7, 9))
	for _, c := range []struct {
		n, experts, k int
		norm          bool
	}{{1, 128, 8, true}, {1, 128, 8, false}, {1, 8, 2, true}, {37, 128, 8, true}, {5, 60, 4, false}} {
		logits := make([]float32, c.n*c.experts)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 2)
		}
		buf := b.NewBuf(len(logits))
		b.Write(buf, logits)
		got := b.Route(buf, c.n, c.experts, c.k, c.norm)
		// A second decode route before the Read: both must be filled by it.
		var again *compute.Routes
		if c.n == 1 {
			again = b.Route(buf, c.n, c.experts, c.k, c.norm)
		}
		sink := make([]float32, 1)
		b.Read(buf, sink)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		want := compute.RouteHost(logits, c.n, c.experts, c.k, c.norm)
		for _, r := range []*compute.Routes{got, again} {
			if r != nil {
				sameRoutes(t, fmt.Sprintf("n=%d experts=%d k=%d norm=%v", c.n, c.experts, c.k, c.norm), r, want)
			}
		}
		// gpt-oss's order: the top k of the logits, then their softmax.
		top := b.RouteTopK(buf, c.n, c.experts, c.k)
		b.Read(buf, sink)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		sameRoutes(t, fmt.Sprintf("top k first n=%d experts=%d k=%d", c.n, c.experts, c.k), top, compute.RouteHostTopK(logits, c.n, c.experts, c.k))
	}
}

// sameRoutes: the same ids, slot by slot, and weights within 1e-5.
func sameRoutes(t *testing.T, what string, r, want *compute.Routes) {
	t.Helper()
	for i := range want.IDs {
		if r.IDs[i] != want.IDs[i] || math.Abs(float64(r.Weights[i]-want.Weights[i])) > 1e-5 {
			t.Fatalf("%s: slot %d: expert %d weight %g, want %d %g", what, i, r.IDs[i], r.Weights[i], want.IDs[i], want.Weights[i])
		}
	}
}

// TestRouteRows: the one-launch router (compute.Router) of a decode row writes the logits
// W x + bias and routes them as RouteHost and RouteHostTopK route those logits; a batch, or
// a router that is not float32, is left to the op-by-op path (nil, nothing queued).
func TestRouteRows(t *testing.T) {
	b := newGPU(t)
	rng := rand.New(rand.NewPCG(21, 22))
	place := func(name string, typ quant.Type, rows, cols int, scale float64) (compute.Weight, []float32) {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		data := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
		if typ == quant.F16 {
			data = make([]byte, 2*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint16(data[2*i:], quant.FP32ToFP16(x))
			}
		}
		w, err := b.Place(compute.WeightSpec{Name: name, Type: typ, Rows: rows, Cols: cols, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return w, v
	}
	for _, c := range []struct {
		hidden, experts, k int
		bias, topKFirst    bool
		norm               bool
	}{{2048, 128, 8, false, false, true}, {2880, 32, 4, true, true, false}, {512, 512, 10, false, false, true}, {256, 60, 4, false, false, false}} {
		what := fmt.Sprintf("hidden=%d experts=%d k=%d", c.hidden, c.experts, c.k)
		w, wv := place("router", quant.F32, c.experts, c.hidden, 0.05)
		var bias compute.Weight
		var bv []float32
		if c.bias {
			bias, bv = place("router bias", quant.F32, 1, c.experts, 0.5)
		}
		xv := make([]float32, c.hidden)
		for i := range xv {
			xv[i] = float32(rng.NormFloat64())
		}
		x, logits := b.NewBuf(2*c.hidden), b.NewBuf(2*c.experts)
		b.Write(x, append(slices.Clone(xv), xv...))
		r := b.RouteRows(logits, x, w, bias, 1, c.experts, c.k, c.topKFirst, c.norm)
		if r == nil {
			t.Fatalf("%s: RouteRows took nothing", what)
		}
		got := make([]float32, c.experts)
		b.Read(logits, got) // also fills r
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		for e := range c.experts {
			want := 0.0
			for i, v := range xv {
				want += float64(wv[e*c.hidden+i]) * float64(v)
			}
			if c.bias {
				want += float64(bv[e])
			}
			if d := math.Abs(float64(got[e]) - want); d > 1e-4*(math.Abs(want)+1) {
				t.Fatalf("%s: logit %d = %g, want %g", what, e, got[e], want)
			}
		}
		want := compute.RouteHost(got, 1, c.experts, c.k, c.norm)
		if c.topKFirst {
			want = compute.RouteHostTopK(got, 1, c.experts, c.k)
		}
		sameRoutes(t, what, r, want)
		if b.RouteRows(logits, x, w, bias, 2, c.experts, c.k, c.topKFirst, c.norm) != nil {
			t.Errorf("%s: RouteRows took a batch of 2", what)
		}
	}
	w16, _ := place("router f16", quant.F16, 64, 256, 0.05)
	x, logits := b.NewBuf(256), b.NewBuf(64)
	if b.RouteRows(logits, x, w16, nil, 1, 64, 4, false, true) != nil {
		t.Error("RouteRows took an f16 router")
	}
}

type routeLog struct{ layers [][]compute.Routes }

func (o *routeLog) Routes(layer int, r compute.Routes) {
	for len(o.layers) <= layer {
		o.layers = append(o.layers, nil)
	}
	o.layers[layer] = append(o.layers[layer], r)
}

// TestDecodeMatchesPrefill runs a prompt through the batch path (grouped expert GEMMs)
// and token by token through the decode path (8-bit activations, fused MoE kernels,
// device routing), and compares every position's logits and expert choices.
func TestDecodeMatchesPrefill(t *testing.T) {
	b := newGPU(t)
	for _, qt := range []quant.Type{quant.Q4_K, quant.Q8_0, quant.F16} {
		t.Run(qt.String(), func(t *testing.T) {
			spec, err := synth.Preset("tiny")
			if err != nil {
				t.Fatal(err)
			}
			spec.Quant = qt
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := synth.Write(context.Background(), path, spec, nil); err != nil {
				t.Fatal(err)
			}
			net := load(t, path, b).net
			V := net.H.Vocab
			prompt := []int{1, 5, 9, 200, 17, 3, 77, 300, 42, 11, 5, 6, 400, 12, 90, 250}

			batch, err := net.NewState(len(prompt), "f16")
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(prompt)*V)
			var wantRoutes routeLog
			if err := net.Forward(batch, prompt, true, want, &wantRoutes); err != nil {
				t.Fatal(err)
			}

			step, err := net.NewState(len(prompt), "f16")
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(prompt)*V)
			var gotRoutes routeLog
			for i, id := range prompt {
				if err := net.Forward(step, []int{id}, false, got[i*V:(i+1)*V], &gotRoutes); err != nil {
					t.Fatal(err)
				}
			}
			maxAbs, rel := compare(got, want)
			t.Logf("%s: decode vs batch: max |Δlogit| %.3g, RMS/std %.4f", qt, maxAbs, rel)
			if rel > 0.03 {
				t.Errorf("%s: decode logits differ from the batch's: RMS/std %.4f", qt, rel)
			}
			same, total := 0, 0
			for l := range wantRoutes.layers {
				w := wantRoutes.layers[l][0]
				for pos, r := range gotRoutes.layers[l] {
					for j := range r.K {
						total++
						if r.IDs[j] == w.IDs[pos*w.K+j] {
							same++
						}
					}
					var sum float32
					for _, x := range r.Weights {
						sum += x
					}
					if math.Abs(float64(sum-1)) > 1e-3 {
						t.Errorf("layer %d position %d: decode route weights %v do not sum to 1", l, pos, r.Weights)
					}
				}
			}
			t.Logf("%s: decode routes agree with the batch's in %d of %d slots", qt, same, total)
			if total == 0 || same < total*9/10 {
				t.Errorf("%s: decode routes agree with the batch's in %d of %d slots", qt, same, total)
			}
		})
	}
}

// TestDecodeGraphMatchesEager decodes the same tokens on a backend that launches op by op
// and on one that replays decode steps as CUDA graphs: logits and routes must agree.
func TestDecodeGraphMatchesEager(t *testing.T) {
	graphs := newGPU(t)
	eager, err := gpu.New(gpu.Options{Eager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eager.Close() })
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	const steps = 12
	prompt := []int{3, 99, 140, 7}
	decode := func(b compute.Backend) ([]float32, routeLog) {
		net := load(t, path, b).net
		V := net.H.Vocab
		st, err := net.NewState(len(prompt)+steps, "f16")
		if err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, V)
		if err := net.Forward(st, prompt, false, logits, nil); err != nil {
			t.Fatal(err)
		}
		var all []float32
		var routes routeLog
		id := prompt[len(prompt)-1]
		for range steps {
			if err := net.Forward(st, []int{id}, false, logits, &routes); err != nil {
				t.Fatal(err)
			}
			all = append(all, logits...)
			id = (id*31 + 17) % V // fixed tokens, not sampled: both runs see the same inputs
		}
		return all, routes
	}
	want, wantRoutes := decode(eager)
	got, gotRoutes := decode(graphs)
	captures, replays, evictions := graphs.GraphStats()
	t.Logf("graphs: %d captured, %d segments replayed, %d evicted", captures, replays, evictions)
	if captures < 1 || replays < steps-4 {
		t.Errorf("graphs: %d captured, %d of %d steps replayed", captures, replays, steps)
	}
	maxAbs, _ := compare(got, want)
	if maxAbs > 1e-4 {
		t.Errorf("graph replay logits differ from op-by-op launches: max |Δ| %g", maxAbs)
	}
	for l := range wantRoutes.layers {
		for i, r := range gotRoutes.layers[l] {
			w := wantRoutes.layers[l][i]
			for j := range r.IDs {
				if r.IDs[j] != w.IDs[j] || r.Weights[j] != w.Weights[j] {
					t.Fatalf("layer %d step %d: graph routes %v %v, op by op %v %v", l, i, r.IDs, r.Weights, w.IDs, w.Weights)
				}
			}
		}
	}
}
