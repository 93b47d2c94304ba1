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

const maxCache = 1 << 16

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
