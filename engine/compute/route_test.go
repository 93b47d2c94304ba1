package compute

import (
	"math"
	"slices"
	"testing"
)

// TestRouteHostTopK: the k largest logits in descending order (ties to the lower id), their
// softmax over those k only.
func TestRouteHostTopK(t *testing.T) {
	logits := []float32{
		0.5, 2, -1, 2, 1.5, // tie between 1 and 3
		-3, -2, -1, -4, -5,
	}
	r := RouteHostTopK(logits, 2, 5, 3)
	if want := []int32{1, 3, 4, 2, 1, 0}; !slices.Equal(r.IDs, want) {
		t.Fatalf("ids %v, want %v", r.IDs, want)
	}
	for tok := range 2 {
		row := logits[tok*5 : (tok+1)*5]
		var sum float64
		for _, e := range r.IDs[tok*3 : (tok+1)*3] {
			sum += math.Exp(float64(row[e]))
		}
		for j, e := range r.IDs[tok*3 : (tok+1)*3] {
			want := math.Exp(float64(row[e])) / sum
			if d := math.Abs(float64(r.Weights[tok*3+j]) - want); d > 1e-6 {
				t.Errorf("token %d expert %d: weight %g, want %g", tok, e, r.Weights[tok*3+j], want)
			}
		}
	}
}
