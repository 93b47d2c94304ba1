// Package sample picks the next token from logits: greedy, or temperature with top-k, top-p
// and min-p filtering and a repetition penalty, reproducible from a seed.
package sample

import (
	"math"
	"math/rand/v2"
)

// Params are the sampling knobs. Temperature 0 means greedy.
type Params struct {
	Temperature   float32
	TopK          int     // 0 = off
	TopP          float32 // 0 or >= 1 = off
	MinP          float32 // 0 = off
	RepeatPenalty float32 // 0 or 1 = off
	RepeatLastN   int     // 0 = 64
	Seed          uint64
}

// Sampler keeps the random state and the recent tokens for the penalty.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	recent []int
	cand   []candidate
	keys   []uint64 // sort keys of the candidates, and their radix-sort scratch
	tmp    []uint64
}

type candidate struct {
	id int
	p  float32 // logit, then probability
}

// New makes a sampler; the same seed and inputs give the same tokens.
func New(p Params) *Sampler {
	if p.RepeatLastN <= 0 {
		p.RepeatLastN = 64
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Accept records a token that entered the context (prompt or generated), for the penalty.
func (s *Sampler) Accept(id int) {
	s.recent = append(s.recent, id)
	if len(s.recent) > s.p.RepeatLastN {
		s.recent = s.recent[len(s.recent)-s.p.RepeatLastN:]
	}
}

// Argmax is the index of the largest logit (the first one on ties).
func Argmax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// Sample chooses a token. logits is modified by the repetition penalty.
func (s *Sampler) Sample(logits []float32) int {
	s.penalize(logits)
	if s.p.Temperature <= 0 {
		return Argmax(logits)
	}
	// The candidates in order (probability down, id up on ties) as far as they are used: the
	// top k alone when top-k is on, else all of them.
	if k := s.p.TopK; k > 0 && k < len(logits) {
		return s.draw(s.topK(logits, k))
	}
	return s.draw(s.sorted(logits))
}

// penalize applies the repetition penalty to the recent tokens' logits.
func (s *Sampler) penalize(logits []float32) {
	if pen := s.p.RepeatPenalty; pen > 0 && pen != 1 {
		for _, id := range s.recent {
			if id < 0 || id >= len(logits) {
				continue
			}
			// The llama.cpp/CTRL rule: shrink positive logits, push negative ones further.
			if logits[id] > 0 {
				logits[id] /= pen
			} else {
				logits[id] *= pen
			}
		}
	}
}

// draw takes the candidates in order, softmaxes them at the temperature, applies min-p and
// top-p, and draws one.
func (s *Sampler) draw(c []candidate) int {
	maxv := c[0].p
	var sum float64
	for i := range c {
		e := math.Exp(float64((c[i].p - maxv) / s.p.Temperature))
		c[i].p = float32(e)
		sum += e
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
	if mp := s.p.MinP; mp > 0 {
		cut := c[0].p * mp
		n := 1
		for n < len(c) && c[n].p >= cut {
			n++
		}
		c = c[:n]
	}
	if tp := s.p.TopP; tp > 0 && tp < 1 {
		var acc float32
		n := 0
		for n < len(c) {
			acc += c[n].p
			n++
			if acc >= tp {
				break
			}
		}
		c = c[:n]
	}
	var total float64
	for _, x := range c {
		total += float64(x.p)
	}
	r := s.rng.Float64() * total
	s.cand = c[:0]
	for _, x := range c {
		r -= float64(x.p)
		if r < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id
}
