package tokenizer

import (
	"bytes"
	"hash/maphash"
)

// strTable maps byte strings to ids. Keys live in one arena, so filling it with a 150k-token
// vocabulary makes no per-key allocation (a map[string]int32 made 150k strings for the GC
// to track, and dominated loading).
type strTable struct {
	seed  maphash.Seed
	arena []byte
	ents  []strEntry
	slots []uint32 // entry index + 1; 0 = empty
	tags  []uint32 // low bits of each slot's hash, to skip most key compares
	mask  uint64
}

type strEntry struct {
	off, n uint32
	id     int32
}

func newStrTable(capacity int) *strTable {
	size := 1024
	for size < capacity*2 {
		size <<= 1
	}
	return &strTable{
		seed:  maphash.MakeSeed(),
		ents:  make([]strEntry, 0, capacity),
		slots: make([]uint32, size),
		tags:  make([]uint32, size),
		mask:  uint64(size - 1),
	}
}

func (t *strTable) key(e strEntry) []byte { return t.arena[e.off : e.off+e.n] }

// put adds key -> id; an existing key keeps its first id.
func (t *strTable) put(key []byte, id int32) {
	if 2*(len(t.ents)+1) > len(t.slots) {
		t.grow()
	}
	h := maphash.Bytes(t.seed, key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			t.ents = append(t.ents, strEntry{uint32(len(t.arena)), uint32(len(key)), id})
			t.arena = append(t.arena, key...)
			t.slots[i], t.tags[i] = uint32(len(t.ents)), uint32(h>>32)
			return
		}
		if t.tags[i] == uint32(h>>32) && bytes.Equal(t.key(t.ents[s-1]), key) {
			return
		}
	}
}

func (t *strTable) grow() {
	size := 2 * len(t.slots)
	t.slots = make([]uint32, size)
	t.tags = make([]uint32, size)
	t.mask = uint64(size - 1)
	for k, e := range t.ents {
		h := maphash.Bytes(t.seed, t.key(e))
		i := h & t.mask
		for t.slots[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i], t.tags[i] = uint32(k+1), uint32(h>>32)
	}
}

func (t *strTable) getBytes(key []byte) (int32, bool) {
	h := maphash.Bytes(t.seed, key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if t.tags[i] == uint32(h>>32) {
			if e := t.ents[s-1]; bytes.Equal(t.key(e), key) {
				return e.id, true
			}
		}
	}
}

func (t *strTable) get(key string) (int32, bool) {
	h := maphash.String(t.seed, key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if t.tags[i] == uint32(h>>32) {
			if e := t.ents[s-1]; string(t.key(e)) == key {
				return e.id, true
			}
		}
	}
}
