package synth

import (
	"hash/fnv"
	"math/rand/v2"
)

// stream is the random source of one unit of work (a tensor slice, a pool): its own PCG,
// seeded from the model seed and the unit's name, so the bytes do not depend on which
// goroutine does the work or in what order.
func stream(seed uint64, name string, index int) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.NewPCG(seed, h.Sum64()^uint64(index)*0x9E3779B97F4A7C15)
}

// irwinHallScale makes the sum of four uniform 16-bit numbers unit-variance: each has
// variance (2^32-1)/12, so the sum has (2^32-1)/3, and this is sqrt(3/(2^32-1)).
const irwinHallScale = 2.6428997921303018e-05

// fillNormal fills dst with zero-mean, approximately normal values of standard deviation
// sigma: the Irwin-Hall sum of four uniforms, bounded at ±3.46 sigma. One 64-bit draw per
// value keeps 30 billion of them affordable where NormFloat64 would not.
func fillNormal(r *rand.PCG, dst []float32, sigma float32) {
	scale := sigma * irwinHallScale
	for i := range dst {
		u := r.Uint64()
		s := int64(u&0xffff) + int64(u>>16&0xffff) + int64(u>>32&0xffff) + int64(u>>48)
		dst[i] = float32(s-2*0xffff) * scale
	}
}

// pick returns a uniform index below n.
func pick(r *rand.PCG, n int) int {
	return int((r.Uint64() >> 32) * uint64(n) >> 32)
}
