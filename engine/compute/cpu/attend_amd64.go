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

// attendF16Fast reports whether the vector kernel can run a head of d dims here.
func attendF16Fast(d int) bool { return d%8 == 0 && cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// attendF16 is one query head over n cached positions (see attend_amd64.c).
func attendF16(q []float32, k, v []uint16, stride, n int, scale float32, scores, out []float32) {
	C.strata_attend_f16_avx2((*C.float)(unsafe.Pointer(&q[0])), (*C.uint16_t)(unsafe.Pointer(&k[0])),
		(*C.uint16_t)(unsafe.Pointer(&v[0])), C.long(stride), C.int(n), C.int(len(q)), C.float(scale),
		(*C.float)(unsafe.Pointer(&scores[0])), (*C.float)(unsafe.Pointer(&out[0])))
}
