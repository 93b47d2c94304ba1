package tokenizer

import (
	"bytes"
	"hash/maphash"
)

// strTable maps byte strings to ids. Keys live in one arena, so filling it with a 150k-token
// vocabulary makes no per-key allocation (a map[string]int32 made 150k strings for the GC
// to track, and dominated loading). A slot holds everything but the key bytes, so a probe
// touches one cache line and the arena only when the hash tag matches.
type strTable struct {
	seed  maphash.Seed
	arena []byte
	slots []strSlot
	mask  uint64
	n     int
}

type strSlot struct {
	tag    uint32 // high hash bits | 1 (0 marks an empty slot)
	off, n uint32 // the key in the arena
	id     int32
}

func newStrTable(capacity int) *strTable {
	size := 1024
	for size*5 < capacity*8 { // load factor <= 0.625
		size <<= 1
	}
	return &strTable{seed: maphash.MakeSeed(), slots: make([]strSlot, size), mask: uint64(size - 1)}
}

func tagOf(h uint64) uint32 { return uint32(h>>32) | 1 }

// put adds key -> id; an existing key keeps its first id.
func (t *strTable) put(key []byte, id int32) {
	if (t.n+1)*8 > len(t.slots)*5 {
		t.grow()
	}
	h := maphash.Bytes(t.seed, key)
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.tag == 0 {
			*s = strSlot{tag, uint32(len(t.arena)), uint32(len(key)), id}
			t.arena = append(t.arena, key...)
			t.n++
			return
		}
		if s.tag == tag && bytes.Equal(t.arena[s.off:s.off+s.n], key) {
			return
		}
	}
}

func (t *strTable) grow() {
	old := t.slots
	t.slots = make([]strSlot, 2*len(old))
	t.mask = uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.tag == 0 {
			continue
		}
		i := maphash.Bytes(t.seed, t.arena[s.off:s.off+s.n]) & t.mask
		for t.slots[i].tag != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = s
	}
}

func (t *strTable) getBytes(key []byte) (int32, bool) {
	h := maphash.Bytes(t.seed, key)
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.tag == 0 {
			return 0, false
		}
		if s.tag == tag && bytes.Equal(t.arena[s.off:s.off+s.n], key) {
			return s.id, true
		}
	}
}

func (t *strTable) get(key string) (int32, bool) {
	h := maphash.String(t.seed, key)
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.tag == 0 {
			return 0, false
		}
		if s.tag == tag && string(t.arena[s.off:s.off+s.n]) == key {
			return s.id, true
		}
	}
}
