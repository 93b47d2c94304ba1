//go:build amd64 && cgo

package quant

/*
#cgo CFLAGS: -O3 -std=gnu11
#include "vecdot_amd64.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Windows note: the Win64 ABI aligns the stack to 16 bytes only, so a 32-byte aligned spill
// (vmovdqa/vmovaps to the stack) would fault there (gcc bug 54412). mingw-w64 gcc 12 spills
// with vmovdqu, checked in its output of vecdot_amd64.c; recheck when changing compilers.

// vdBestLevel is the fastest kernel level this CPU runs. x/sys/cpu's feature flags already
// include the OS check (XSAVE state for AVX and AVX-512).
func vdBestLevel() vdLevel {
	x := cpu.X86
	if !x.HasAVX2 || !x.HasFMA || !x.HasF16C {
		return levelGeneric
	}
	if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI {
		return levelAVX512VNNI
	}
	return levelAVX2
}

// vdLevels lists the levels this CPU can run, best last (for tests and benchmarks).
func vdLevels() []vdLevel {
	var ls []vdLevel
	for l := levelGeneric; l <= vdBestLevel(); l++ {
		ls = append(ls, l)
	}
	return ls
}

// vdNative runs the C kernel of level l for rows [r0, r1), on arguments MatMul has checked.
// It reports false when there is no kernel for t (nothing is written then).
func vdNative(l vdLevel, t Type, w []byte, rb int, a *Activations, y []float32, ldy, r0, r1 int) bool {
	var aq *C.int8_t
	var ad *C.float
	var as *C.int16_t
	var af *C.float
	if a.kind == actFloat {
		af = (*C.float)(unsafe.Pointer(unsafe.SliceData(a.xf)))
	} else {
		aq = (*C.int8_t)(unsafe.Pointer(unsafe.SliceData(a.qs)))
		ad = (*C.float)(unsafe.Pointer(unsafe.SliceData(a.d)))
		as = (*C.int16_t)(unsafe.Pointer(unsafe.SliceData(a.sums)))
	}
	rc := C.vd_matmul(C.int(l), C.int(t), (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(w))), C.int64_t(rb),
		C.int64_t(a.cols), aq, ad, as, af, C.int64_t(a.n),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(y))), C.int64_t(ldy), C.int64_t(r0), C.int64_t(r1))
	return rc == 0
}

// vdNativeFloatRow dots one float32 weight row (a dequantised row of a type without an
// integer kernel) with every float activation row, writing y[i*ldy]. It reports false when
// level l has no kernel.
func vdNativeFloatRow(l vdLevel, row []float32, a *Activations, y []float32, ldy int) bool {
	if l == levelGeneric || a.kind != actFloat {
		return false
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(row))), 4*len(row))
	return vdNative(l, F32, b, len(b), a, y, ldy, 0, 1)
}

// readSumNative adds b's whole 128-byte chunks as 64-bit words with AVX2 loads, reporting
// how many bytes it covered (0 without AVX2).
func readSumNative(b []byte) (uint64, int) {
	n := len(b) &^ 127
	if n == 0 || !cpu.X86.HasAVX2 {
		return 0, 0
	}
	return uint64(C.vd_read_sum((*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b))), C.int64_t(n))), n
}

// vdQuantizeNative runs Activations.Set's rounding in C at level l (whole blocks of x). It
// reports false when l has no kernel.
func vdQuantizeNative(l vdLevel, x []float32, block int, qs []int8, d []float32, sums []int16) bool {
	if l == levelGeneric || len(x) == 0 {
		return false
	}
	rc := C.vd_quantize(C.int(l), (*C.float)(unsafe.Pointer(unsafe.SliceData(x))), C.int64_t(len(x)/block), C.int(block),
		(*C.int8_t)(unsafe.Pointer(unsafe.SliceData(qs))), (*C.float)(unsafe.Pointer(unsafe.SliceData(d))),
		(*C.int16_t)(unsafe.Pointer(unsafe.SliceData(sums))))
	return rc == 0
}
