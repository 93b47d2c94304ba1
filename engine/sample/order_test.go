package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// refSampler is the sampler as it was before the ranking became a heap and a radix sort:
// a comparison sort of every candidate, then the same draw. The tokens must not change.
type refSampler struct{ s *Sampler }

func newRef(p Params) *refSampler { return &refSampler{New(p)} }

func (r *refSampler) accept(id int) { r.s.Accept(id) }

func (r *refSampler) sample(logits []float32) int {
	r.s.penalize(logits)
	if r.s.p.Temperature <= 0 {
		return Argmax(logits)
	}
	var c []candidate
	for i, v := range logits {
		c = append(c, candidate{i, v})
	}
	sort.Slice(c, func(i, j int) bool {
		if c[i].p != c[j].p {
			return c[i].p > c[j].p
		}
		return c[i].id < c[j].id
	})
	if k := r.s.p.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	return r.s.draw(c)
}

// randomLogits has ties (values on a coarse grid), both zeros and a spread of magnitudes.
func randomLogits(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		switch r.IntN(10) {
		case 0:
			out[i] = float32(math.Copysign(0, -1))
		case 1:
			out[i] = 0
		case 2:
			out[i] = float32(r.NormFloat64() * 8)
		default:
			out[i] = float32(math.Round(r.NormFloat64()*40) / 8)
		}
	}
	return out
}

// TestSamplingMatchesTheComparisonSort: for every filter combination, the same seed draws
// the same tokens as the comparison sort did, over odd vocabulary sizes.
func TestSamplingMatchesTheComparisonSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	params := []Params{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 20, TopP: 0.8, RepeatPenalty: 1.05},
		{Temperature: 0.2, TopK: 20, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.05},
		{Temperature: 1.0, TopK: 50, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1.1},
		{Temperature: 1.5, TopK: 1},
		{Temperature: 2, TopK: 4000},
		{Temperature: 0.5, TopP: 0.5},
		{Temperature: 3, MinP: 0.3, RepeatPenalty: 1.3, RepeatLastN: 7},
	}
	for _, n := range []int{1, 2, 37, 1000, 4099} {
		for pi, p := range params {
			p.Seed = uint64(100*n + pi)
			got, want := New(p), newRef(p)
			for step := range 30 {
				logits := randomLogits(r, n)
				a, b := got.Sample(slices.Clone(logits)), want.sample(slices.Clone(logits))
				if a != b {
					t.Fatalf("vocab %d params %+v step %d: drew %d, the comparison sort drew %d", n, p, step, a, b)
				}
				got.Accept(a)
				want.accept(b)
			}
		}
	}
}

// TestRankKeyOrder: keys order by logit down, then id up; -0 ties +0; infinities at the ends.
func TestRankKeyOrder(t *testing.T) {
	vals := []float32{float32(math.Inf(1)), 3, 1e-30, 0, float32(math.Copysign(0, -1)), -1e-30, -2, float32(math.Inf(-1))}
	for i := 1; i < len(vals); i++ {
		a, b := rankKey(vals[i-1], 5), rankKey(vals[i], 5)
		if vals[i-1] == vals[i] {
			if a != b {
				t.Errorf("%g and %g rank apart", vals[i-1], vals[i])
			}
		} else if a >= b {
			t.Errorf("%g does not rank before %g", vals[i-1], vals[i])
		}
	}
	if rankKey(1, 3) >= rankKey(1, 4) {
		t.Error("on a tie the lower id does not rank first")
	}
}

func BenchmarkSampleTopK(b *testing.B) {
	benchSample(b, Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepeatPenalty: 1.05})
}
func BenchmarkSampleAll(b *testing.B) { benchSample(b, Params{Temperature: 1}) }

func benchSample(b *testing.B, p Params) {
	logits := randomLogits(rand.New(rand.NewPCG(1, 1)), 151936)
	s := New(p)
	buf := make([]float32, len(logits))
	for b.Loop() {
		copy(buf, logits)
		s.Sample(buf)
	}
}

// BenchmarkRefSampleTopK is the comparison sort the sampler replaced, for comparison.
func BenchmarkRefSampleTopK(b *testing.B) {
	logits := randomLogits(rand.New(rand.NewPCG(1, 1)), 151936)
	s := newRef(Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepeatPenalty: 1.05})
	buf := make([]float32, len(logits))
	for b.Loop() {
		copy(buf, logits)
		s.sample(buf)
	}
}
