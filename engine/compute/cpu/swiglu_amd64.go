//go:build amd64 && cgo

package cpu

/*
#include "swiglu_amd64.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// swiGLU sets g[i] = silu(g[i]) * u[i].
func swiGLU(g, u []float32) {
	if len(g) == 0 {
		return
	}
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		swiGLUGo(g, u)
		return
	}
	u = u[:len(g)]
	C.strata_swiglu_avx2((*C.float)(unsafe.Pointer(&g[0])), (*C.float)(unsafe.Pointer(&u[0])), C.int64_t(len(g)))
}
