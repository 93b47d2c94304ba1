package tokenizer

import (
	"sync"
)

// bpe is a byte-level BPE model over raw bytes: the byte-level mapping is undone at load
// time, so encoding never builds mapped strings.
type bpe struct {
	vocab        *strTable  // raw bytes of every normal token -> id
	byteTok      [256]int32 // id of each single-byte token, -1 if the vocab lacks it
	merges       *pairTable // (left id, right id) -> rank and result
	ignoreMerges bool       // a pre-token that is itself a token is emitted whole

	mu    sync.Mutex
	cache map[string][]int32 // pre-token -> ids, cleared when full
}

type merge struct{ rank, id int32 }

const (
	maxCache      = 1 << 16 // cached pre-tokens
	maxCachedWord = 256     // longer pre-tokens go through mergeLong
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPE(vocabSize, mergeCount int) *bpe {
	m := &bpe{vocab: newStrTable(vocabSize), merges: newPairTable(mergeCount), cache: make(map[string][]int32)}
	for i := range m.byteTok {
		m.byteTok[i] = -1
	}
	return m
}

// addToken registers a normal token by its raw bytes.
func (m *bpe) addToken(raw []byte, id int32) {
	m.vocab.put(raw, id)
	if len(raw) == 1 && m.byteTok[raw[0]] < 0 {
		m.byteTok[raw[0]] = id
	}
}

// mergeOf resolves a merge of two raw-byte tokens, given as ab = a+b with a of length la;
// false if either part or the result is not in the vocabulary (it could never apply).
func (m *bpe) mergeOf(ab []byte, la int) (uint64, int32, bool) {
	ia, ok1 := m.vocab.getBytes(ab[:la])
	ib, ok2 := m.vocab.getBytes(ab[la:])
	ic, ok3 := m.vocab.getBytes(ab)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	return pairKey(ia, ib), ic, true
}

// encode appends the ids of one pre-token. Bytes with no token are dropped (HF BPE without
// unk_token does the same).
func (m *bpe) encode(word string, out []int) []int {
	if m.ignoreMerges {
		if id, ok := m.vocab.get(word); ok {
			return append(out, int(id))
		}
	}
	if len(word) == 1 {
		if id := m.byteTok[word[0]]; id >= 0 {
			out = append(out, int(id))
		}
		return out
	}
	if len(word) > maxCachedWord { // long words: not worth caching, and need O(n log n)
		for _, id := range m.mergeLong(word) {
			out = append(out, int(id))
		}
		return out
	}
	m.mu.Lock()
	ids, ok := m.cache[word]
	m.mu.Unlock()
	if !ok {
		ids = m.merge(word)
		m.mu.Lock()
		if len(m.cache) >= maxCache {
			clear(m.cache)
		}
		m.cache[word] = ids
		m.mu.Unlock()
	}
	for _, id := range ids {
		out = append(out, int(id))
	}
	return out
}

// merge runs BPE on one word: repeatedly merge the adjacent pair of lowest rank, leftmost
// first. rank[i] caches the rank of pair (i, i+1) so each step is one scan of an int slice.
func (m *bpe) merge(word string) []int32 {
	syms := make([]int32, 0, len(word))
	for i := 0; i < len(word); i++ {
		if id := m.byteTok[word[i]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	if len(syms) < 2 {
		return syms
	}
	const none = int32(1<<31 - 1)
	rank := make([]int32, len(syms)-1)
	res := make([]int32, len(syms)-1)
	look := func(i int) {
		if mg, ok := m.merges.get(pairKey(syms[i], syms[i+1])); ok {
			rank[i], res[i] = mg.rank, mg.id
		} else {
			rank[i] = none
		}
	}
	for i := range rank {
		look(i)
	}
	for len(syms) > 1 {
		best, bi := none, -1
		for i, r := range rank {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = res[bi]
		syms = append(syms[:bi+1], syms[bi+2:]...)
		rank = append(rank[:bi], rank[bi+1:]...)
		res = append(res[:bi], res[bi+1:]...)
		if bi > 0 {
			look(bi - 1)
		}
		if bi < len(rank) {
			look(bi)
		}
	}
	return syms
}

// mergeLong is merge for long words in O(n log n): the symbols form a linked list and the
// candidate pairs a heap ordered by (rank, position), so the lowest rank merges first and,
// among equal ranks, the leftmost, exactly as merge does. A popped pair whose symbols
// have changed since it was pushed is stale and skipped.
func (m *bpe) mergeLong(word string) []int32 {
	var sym, prev, next []int32
	for i := 0; i < len(word); i++ {
		if id := m.byteTok[word[i]]; id >= 0 {
			sym = append(sym, id)
		}
	}
	n := len(sym)
	prev, next = make([]int32, n), make([]int32, n)
	for i := range sym {
		prev[i], next[i] = int32(i-1), int32(i+1)
	}
	h := &pairHeap{}
	push := func(i int32) {
		if i < 0 || next[i] >= int32(n) {
			return
		}
		j := next[i]
		if mg, ok := m.merges.get(pairKey(sym[i], sym[j])); ok {
			h.push(pairCand{mg.rank, i, sym[i], sym[j], mg.id})
		}
	}
	for i := 0; i < n-1; i++ {
		push(int32(i))
	}
	for h.len() > 0 {
		c := h.pop()
		j := next[c.pos]
		if sym[c.pos] != c.left || j >= int32(n) || sym[j] != c.right {
			continue // stale
		}
		sym[c.pos] = c.id
		sym[j] = -1 // removed
		next[c.pos] = next[j]
		if next[j] < int32(n) {
			prev[next[j]] = c.pos
		}
		push(prev[c.pos])
		push(c.pos)
	}
	out := make([]int32, 0, n)
	for i := int32(0); i < int32(n) && n > 0; i = next[i] {
		out = append(out, sym[i])
	}
	return out
}

type pairCand struct {
	rank, pos   int32
	left, right int32
	id          int32
}

// pairHeap is a binary min-heap of merge candidates by (rank, pos).
type pairHeap struct{ a []pairCand }

func (h *pairHeap) len() int { return len(h.a) }

func (h *pairHeap) less(i, j int) bool {
	if h.a[i].rank != h.a[j].rank {
		return h.a[i].rank < h.a[j].rank
	}
	return h.a[i].pos < h.a[j].pos
}

func (h *pairHeap) push(c pairCand) {
	h.a = append(h.a, c)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *pairHeap) pop() pairCand {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < last && h.less(l, small) {
			small = l
		}
		if r < last && h.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		h.a[i], h.a[small] = h.a[small], h.a[i]
		i = small
	}
	return top
}
