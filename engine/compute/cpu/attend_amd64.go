//go:build amd64 && cgo

package cpu

/*
#cgo CFLAGS: -O3 -std=gnu11 -Wno-psabi
#cgo LDFLAGS: -lm
#include "attend_amd64.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// attendF16Fast reports whether the vector kernel can run heads of d dims here.
func attendF16Fast(d int) bool {
	return d%8 == 0 && d <= C.STRATA_ATTEND_MAX_DIM && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
}

// attendF16 runs the g query heads (sharing one KV head) of t consecutive tokens over the
// cache (see attend_amd64.c): token j's heads are g rows of d floats from q[j*qs:], its
// output likewise in out; the first token sees n positions, each next one more. scores holds
// t*g*(n+t-1) floats. With ml (2g floats, t = 1) the positions are one part of the context:
// out gets the unnormalised sums, ml each head's max score and weight sum.
func attendF16(q []float32, qs int, k, v []uint16, stride, n, t, g, d int, scale float32, scores, out, ml []float32) {
	var mlp *C.float
	if ml != nil {
		mlp = (*C.float)(unsafe.Pointer(&ml[0]))
	}
	C.strata_attend_f16_avx2((*C.float)(unsafe.Pointer(&q[0])), C.long(qs), (*C.uint16_t)(unsafe.Pointer(&k[0])),
		(*C.uint16_t)(unsafe.Pointer(&v[0])), C.long(stride), C.int(n), C.int(t), C.int(d), C.int(g), C.float(scale),
		(*C.float)(unsafe.Pointer(&scores[0])), (*C.float)(unsafe.Pointer(&out[0])), mlp)
}

// attendQ8 is attendF16 over an int8 cache: k and v from a head's row start, ks and vs their
// scales from the same row's first (one per kv.Int8Block values; d a multiple of it).
func attendQ8(q []float32, qs int, k, v []int8, ks, vs []float32, stride, n, t, g, d int, scale float32, scores, out, ml []float32) {
	var mlp *C.float
	if ml != nil {
		mlp = (*C.float)(unsafe.Pointer(&ml[0]))
	}
	C.strata_attend_q8_avx2((*C.float)(unsafe.Pointer(&q[0])), C.long(qs), (*C.int8_t)(unsafe.Pointer(&k[0])),
		(*C.int8_t)(unsafe.Pointer(&v[0])), (*C.float)(unsafe.Pointer(&ks[0])), (*C.float)(unsafe.Pointer(&vs[0])),
		C.long(stride), C.int(n), C.int(t), C.int(d), C.int(g), C.float(scale),
		(*C.float)(unsafe.Pointer(&scores[0])), (*C.float)(unsafe.Pointer(&out[0])), mlp)
}
