package quant

import "encoding/binary"

// ReadSum adds b as little-endian 64-bit words (a trailing partial word as its bytes),
// with the widest loads the kernels use. It is for measuring read bandwidth: a weight
// stream cannot be read faster than ReadSum reads memory, and the sum keeps the reads
// from being optimised away.
func ReadSum(b []byte) uint64 {
	s, n := readSumNative(b)
	rest := b[n:]
	for len(rest) >= 8 {
		s += binary.LittleEndian.Uint64(rest)
		rest = rest[8:]
	}
	for i, c := range rest {
		s += uint64(c) << (8 * i)
	}
	return s
}
