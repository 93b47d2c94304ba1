package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestReadSum checks the vector sum against a word-by-word sum at lengths around the
// kernel's 128-byte chunks and at unaligned starts.
func TestReadSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 4096+7)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for _, start := range []int{0, 1, 7} {
		for _, n := range []int{0, 1, 8, 127, 128, 129, 255, 256, 1000, 4096} {
			b := buf[start : start+n]
			var want uint64
			for i := 0; i < len(b); i += 8 {
				var w [8]byte
				copy(w[:], b[i:])
				want += binary.LittleEndian.Uint64(w[:])
			}
			if got := ReadSum(b); got != want {
				t.Errorf("start %d, %d bytes: ReadSum %#x, want %#x", start, n, got, want)
			}
		}
	}
}

// BenchmarkReadSum is the read bandwidth of one thread (256 MiB, out of cache).
func BenchmarkReadSum(b *testing.B) {
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(len(buf)))
	var s uint64
	for b.Loop() {
		s += ReadSum(buf)
	}
	b.ReportMetric(float64(len(buf))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	runtime.KeepAlive(s)
}
