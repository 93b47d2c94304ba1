package sample

import (
	"math"
	"testing"
)

func logitsOf(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = float32(math.Log(v))
	}
	return out
}

func TestGreedyPicksTheLargestAndTheFirstOnTies(t *testing.T) {
	s := New(Params{})
	if got := s.Sample([]float32{0.1, 3, -1, 3}); got != 1 {
		t.Fatalf("greedy = %d, want 1", got)
	}
}

func TestSameSeedSameTokens(t *testing.T) {
	draw := func(seed uint64) []int {
		s := New(Params{Temperature: 1, Seed: seed})
		var out []int
		for range 50 {
			out = append(out, s.Sample(logitsOf(0.1, 0.2, 0.3, 0.4)))
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	same := func(x, y []int) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("the same seed gave different tokens")
	}
	if same(a, c) {
		t.Fatal("different seeds gave the same 50 tokens")
	}
}

// TestFiltersKeepOnlyAllowedTokens: each filter's surviving set, checked over many draws.
func TestFiltersKeepOnlyAllowedTokens(t *testing.T) {
	probs := logitsOf(0.5, 0.25, 0.15, 0.07, 0.03)
	cases := []struct {
		name    string
		p       Params
		allowed map[int]bool
	}{
		{"top-k 2", Params{Temperature: 1, TopK: 2}, map[int]bool{0: true, 1: true}},
		{"top-p 0.7", Params{Temperature: 1, TopP: 0.7}, map[int]bool{0: true, 1: true}},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8}, map[int]bool{0: true, 1: true, 2: true}},
		{"min-p 0.4", Params{Temperature: 1, MinP: 0.4}, map[int]bool{0: true, 1: true}},
		{"min-p 0.1", Params{Temperature: 1, MinP: 0.1}, map[int]bool{0: true, 1: true, 2: true, 3: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.p)
			seen := map[int]int{}
			for range 2000 {
				id := s.Sample(append([]float32(nil), probs...))
				if !c.allowed[id] {
					t.Fatalf("drew token %d, outside %v", id, c.allowed)
				}
				seen[id]++
			}
			if len(seen) != len(c.allowed) {
				t.Errorf("drew %v, expected every one of %v", seen, c.allowed)
			}
		})
	}
}

func TestTemperatureFollowsTheDistribution(t *testing.T) {
	s := New(Params{Temperature: 1, Seed: 3})
	counts := make([]int, 3)
	const n = 20000
	for range n {
		counts[s.Sample(logitsOf(0.6, 0.3, 0.1))]++
	}
	for i, want := range []float64{0.6, 0.3, 0.1} {
		if got := float64(counts[i]) / n; math.Abs(got-want) > 0.02 {
			t.Errorf("token %d drawn %.3f of the time, want %.2f", i, got, want)
		}
	}
}

func TestRepetitionPenalty(t *testing.T) {
	s := New(Params{RepeatPenalty: 2})
	s.Accept(0)
	// Token 0 leads 2.0 to 1.5, but its penalised logit 1.0 loses; a negative one sinks further.
	if got := s.Sample([]float32{2.0, 1.5, -1}); got != 1 {
		t.Fatalf("with the penalty greedy = %d, want 1", got)
	}
	s.Accept(2)
	l := []float32{-1, -3, -1}
	s.Sample(l)
	if l[2] != -2 {
		t.Fatalf("negative logit penalised to %v, want -2", l[2])
	}
}
