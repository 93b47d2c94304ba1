package compute

import "math"

// RouteHost is the reference router on host logits [n x experts]: softmax over every expert,
// the top k by probability (ties to the lower id), renormalised when norm is set.
func RouteHost(logits []float32, n, experts, k int, norm bool) *Routes {
	r := &Routes{N: n, K: k, IDs: make([]int32, n*k), Weights: make([]float32, n*k)}
	p := make([]float32, experts)
	for t := range n {
		row := logits[t*experts : (t+1)*experts]
		maxv := row[0]
		for _, v := range row {
			maxv = max(maxv, v)
		}
		var sum float32
		for e, v := range row {
			p[e] = float32(math.Exp(float64(v - maxv)))
			sum += p[e]
		}
		ids, ws := r.IDs[t*k:(t+1)*k], r.Weights[t*k:(t+1)*k]
		for j := range k {
			best := -1
			for e := range experts {
				if p[e] >= 0 && (best < 0 || p[e] > p[best]) {
					best = e
				}
			}
			ids[j], ws[j] = int32(best), p[best]/sum
			p[best] = -1
		}
		if norm {
			var s float32
			for _, w := range ws {
				s += w
			}
			for j := range ws {
				ws[j] /= s
			}
		}
	}
	return r
}

// RouteHostTopK is the reference of Backend.RouteTopK on host logits [n x experts]: the k
// largest logits (ties to the lower id), in descending order, then a softmax over those k.
func RouteHostTopK(logits []float32, n, experts, k int) *Routes {
	r := &Routes{N: n, K: k, IDs: make([]int32, n*k), Weights: make([]float32, n*k)}
	taken := make([]bool, experts)
	for t := range n {
		row := logits[t*experts : (t+1)*experts]
		ids, ws := r.IDs[t*k:(t+1)*k], r.Weights[t*k:(t+1)*k]
		clear(taken)
		for j := range k {
			best := -1
			for e, v := range row {
				if !taken[e] && (best < 0 || v > row[best]) {
					best = e
				}
			}
			taken[best] = true
			ids[j] = int32(best)
		}
		// The first is the largest, so every exponent is at most 0.
		top := row[ids[0]]
		var sum float32
		for j, e := range ids {
			ws[j] = float32(math.Exp(float64(row[e] - top)))
			sum += ws[j]
		}
		for j := range ws {
			ws[j] /= sum
		}
	}
	return r
}
