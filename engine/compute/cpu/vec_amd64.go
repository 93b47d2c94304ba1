//go:build amd64 && cgo

package cpu

/*
#include "vec_amd64.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// rmsNorm is rmsNormGo, eight values at a time where the CPU has AVX2.
func rmsNorm(dst, x, w []float32, rows int, eps float32) {
	dim := len(w)
	if rows <= 0 || dim == 0 {
		return
	}
	if !cpu.X86.HasAVX2 {
		rmsNormGo(dst, x, w, rows, eps)
		return
	}
	dst, x = dst[:rows*dim], x[:rows*dim] // bounds checked here, not in C
	C.strata_rmsnorm_avx2((*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&x[0])),
		(*C.float)(unsafe.Pointer(&w[0])), C.int64_t(rows), C.int64_t(dim), C.float(eps))
}

// addScaled is addScaledGo, eight values at a time where the CPU has AVX2.
func addScaled(o []float32, s float32, x []float32) {
	if len(o) == 0 {
		return
	}
	if !cpu.X86.HasAVX2 {
		addScaledGo(o, s, x)
		return
	}
	x = x[:len(o)]
	C.strata_add_scaled_avx2((*C.float)(unsafe.Pointer(&o[0])), C.float(s), (*C.float)(unsafe.Pointer(&x[0])), C.int64_t(len(o)))
}
