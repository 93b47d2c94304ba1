package cpu

import (
	"math"
	"sort"

	"strata/engine/compute"
)

// MoE adds each token's routed experts, weighted, to dst. Tokens are grouped by expert so each
// expert's weights are read once per call (prefill), and all experts' gate and up products
// run as one parallel loop, then all down products as another.
func (b *Backend) MoE(dst, x compute.Buf, gate, up, down compute.Weight, r *compute.Routes) {
	G, U, Dn := gate.(*Weight), up.(*Weight), down.(*Weight)
	H, F := G.cols, G.rows
	xs, out := f32(x), f32(dst)

	byExpert := map[int32][]int{} // expert -> indices into r.IDs
	for i, e := range r.IDs {
		byExpert[e] = append(byExpert[e], i)
	}
	experts := make([]int32, 0, len(byExpert))
	for e := range byExpert {
		experts = append(experts, e)
	}
	sort.Slice(experts, func(i, j int) bool { return experts[i] < experts[j] })

	gu := make([]segment, 0, 2*len(experts))
	acts := make([][]float32, len(experts))
	for j, e := range experts {
		idx := byExpert[e]
		ne := len(idx)
		xe := make([]float32, ne*H)
		for i, k := range idx {
			t := k / r.K
			copy(xe[i*H:(i+1)*H], xs[t*H:(t+1)*H])
		}
		g, u := make([]float32, ne*F), make([]float32, ne*F)
		gu = append(gu, segment{w: G, expert: int(e), xs: xe, n: ne, y: g}, segment{w: U, expert: int(e), xs: xe, n: ne, y: u})
		acts[j] = g
	}
	b.matmulSegments(gu)

	dn := make([]segment, len(experts))
	for j, e := range experts {
		g, u := gu[2*j].y, gu[2*j+1].y
		for i, v := range g {
			g[i] = v / (1 + float32(math.Exp(float64(-v)))) * u[i]
		}
		ne := len(byExpert[e])
		dn[j] = segment{w: Dn, expert: int(e), xs: acts[j], n: ne, y: make([]float32, ne*H)}
	}
	b.matmulSegments(dn)

	for j, e := range experts {
		y := dn[j].y
		for i, k := range byExpert[e] {
			t, w := k/r.K, r.Weights[k]
			o := out[t*H : (t+1)*H]
			for c, v := range y[i*H : (i+1)*H] {
				o[c] += w * v
			}
		}
	}
}

// Route runs the reference router on the host (the logits already are there).
func (b *Backend) Route(logits compute.Buf, n, experts, k int, norm bool) *compute.Routes {
	return compute.RouteHost(f32(logits)[:n*experts], n, experts, k, norm)
}
