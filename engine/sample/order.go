package sample

import (
	"container/heap"
	"math"
	"slices"
)

// The sampler ranks candidates by logit, highest first, the lower id first on ties (-0 and
// +0 tie). A vocabulary is 150-200 thousand logits: a comparison sort of all of them took
// tens of milliseconds a token, longer than the forward pass on a GPU. Top-k keeps the k
// best with a heap in one pass; the full order is a radix sort of keys that encode the same
// ranking, so both give exactly the order, and thus the tokens, of a sort.

// rankKey encodes (logit descending, id ascending) as an unsigned key in ascending order.
func rankKey(v float32, id int) uint64 {
	if v == 0 {
		v = 0 // -0 ranks as +0
	}
	b := math.Float32bits(v)
	if b&(1<<31) != 0 {
		b = ^b // negative: larger magnitude ranks lower
	} else {
		b |= 1 << 31
	}
	// b grows with v; the key grows as v falls, then with the id.
	return uint64(^b)<<32 | uint64(uint32(id))
}

// sorted returns every logit as a candidate, ranked.
func (s *Sampler) sorted(logits []float32) []candidate {
	keys := s.keys[:0]
	for i, v := range logits {
		keys = append(keys, rankKey(v, i))
	}
	if len(keys) < 1<<12 { // below that the radix passes' counts cost more than they save
		slices.Sort(keys)
	} else {
		s.tmp = slices.Grow(s.tmp[:0], len(keys))[:len(keys)]
		radixSort(keys, s.tmp)
	}
	s.keys = keys
	c := s.cand[:0]
	for _, k := range keys {
		id := int(uint32(k))
		c = append(c, candidate{id, logits[id]})
	}
	return c
}

// radixSort sorts keys ascending (LSD, 16 bits a pass), using tmp (as long) as scratch;
// passes whose digit is the same in every key are skipped.
func radixSort(keys, tmp []uint64) {
	var count [1 << 16]int
	src, dst := keys, tmp
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&0xffff]++
		}
		if count[(src[0]>>shift)&0xffff] == len(src) {
			continue
		}
		sum := 0
		for i, n := range count {
			count[i] = sum
			sum += n
		}
		for _, k := range src {
			d := (k >> shift) & 0xffff
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// topK returns the k best candidates, ranked.
func (s *Sampler) topK(logits []float32, k int) []candidate {
	h := worstFirst(s.cand[:0])
	for i, v := range logits {
		switch {
		case len(h) < k:
			heap.Push(&h, candidate{i, v})
		case v > h[0].p || (v == h[0].p && i < h[0].id): // ranks above the worst kept (rankKey's order)
			h[0] = candidate{i, v}
			heap.Fix(&h, 0)
		}
	}
	c := []candidate(h)
	slices.SortFunc(c, func(a, b candidate) int {
		ka, kb := rankKey(a.p, a.id), rankKey(b.p, b.id)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return c
}

// worstFirst is a heap whose top is the lowest-ranked candidate.
type worstFirst []candidate

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return rankKey(h[i].p, h[i].id) > rankKey(h[j].p, h[j].id) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
