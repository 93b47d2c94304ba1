package tokenizer

// pairTable maps a pair of token ids to its merge. It is a flat open-addressing hash table:
// cheaper to fill than a Go map when a vocabulary's 150k-450k merges load, and as fast
// to probe.
type pairTable struct {
	keys []uint64 // pairKey+1; 0 marks an empty slot
	vals []merge
	mask uint64
	n    int
}

func newPairTable(capacity int) *pairTable {
	size := 1024
	for size*5 < capacity*8 { // load factor <= 0.625
		size <<= 1
	}
	return &pairTable{keys: make([]uint64, size), vals: make([]merge, size), mask: uint64(size - 1)}
}

func (p *pairTable) slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> 20 & p.mask }

func (p *pairTable) get(k uint64) (merge, bool) {
	k++
	for i := p.slot(k); ; i = (i + 1) & p.mask {
		switch p.keys[i] {
		case k:
			return p.vals[i], true
		case 0:
			return merge{}, false
		}
	}
}

// put stores m under k unless k is present (the first, lowest rank wins, as in HF).
func (p *pairTable) put(k uint64, m merge) {
	if (p.n+1)*8 > len(p.keys)*5 {
		p.grow()
	}
	k++
	for i := p.slot(k); ; i = (i + 1) & p.mask {
		switch p.keys[i] {
		case k:
			return
		case 0:
			p.keys[i], p.vals[i] = k, m
			p.n++
			return
		}
	}
}

func (p *pairTable) grow() {
	old, oldVals := p.keys, p.vals
	p.keys = make([]uint64, 2*len(old))
	p.vals = make([]merge, 2*len(old))
	p.mask = uint64(len(p.keys) - 1)
	p.n = 0
	for i, k := range old {
		if k != 0 {
			p.put(k-1, oldVals[i])
		}
	}
}
