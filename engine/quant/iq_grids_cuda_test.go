package quant

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The C copies of the grids, written from these tables: the CUDA kernels' and the x86
// kernels'.
const (
	cudaGridsFile = "../../cuda/kernels/iq_grids.cuh"
	x86GridsFile  = "vecdot_iq_grids.h"
)

// gridsSource is a C header of ggml's grid words as arrays declared with qual, named with
// prefix, for the file name.
func gridsSource(name, qual, prefix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// %s: the IQ2/IQ3 grids as ggml's words (byte j = coordinate j), generated from\n", name)
	b.WriteString("// engine/quant's tables by TestCUDAGridsMatch (STRATA_WRITE_CUDA_GRIDS=1 rewrites it): do not edit.\n")
	b.WriteString("#pragma once\n#include <stdint.h>\n")
	w64 := func(name string, n int, f func(int) uint64) {
		fmt.Fprintf(&b, "\nstatic const %suint64_t %s%s[%d] = {", qual, prefix, name, n)
		for i := range n {
			if i%4 == 0 {
				b.WriteString("\n\t")
			} else {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "0x%016xull,", f(i))
		}
		b.WriteString("\n};\n")
	}
	w32 := func(name string, n int, f func(int) uint32) {
		fmt.Fprintf(&b, "\nstatic const %suint32_t %s%s[%d] = {", qual, prefix, name, n)
		for i := range n {
			if i%8 == 0 {
				b.WriteString("\n\t")
			} else {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "0x%08xu,", f(i))
		}
		b.WriteString("\n};\n")
	}
	w64("iq2xxs_grid", 256, gridIQ2XXS)
	w64("iq2xs_grid", 512, gridIQ2XS)
	w64("iq2s_grid", 1024, gridIQ2S)
	w32("iq3xxs_grid", 256, gridIQ3XXS)
	w32("iq3s_grid", 512, gridIQ3S)
	if qual == "" {
		// The x86 kernels' sign table: for each 7-bit sign index, the 8 signs as bytes
		// (0xff for -1, 0x01 for +1), ready for _mm256_sign_epi8.
		w64("ksigns_bytes", 128, func(i int) uint64 {
			var w uint64
			for j, s := 0, ksignsIQ2XS(uint32(i)); j < 8; j++ {
				v := uint64(0x01)
				if s>>j&1 != 0 {
					v = 0xff
				}
				w |= v << (8 * j)
			}
			return w
		})
	}
	return b.String()
}

// TestCUDAGridsMatch: the CUDA and x86 kernels' grids are these grids.
func TestCUDAGridsMatch(t *testing.T) {
	for _, f := range []struct{ path, qual, prefix string }{
		{cudaGridsFile, "__device__ ", ""},
		{x86GridsFile, "", "vd_"},
	} {
		want := gridsSource(filepath.Base(f.path), f.qual, f.prefix)
		if os.Getenv("STRATA_WRITE_CUDA_GRIDS") == "1" {
			if err := os.WriteFile(f.path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s differs from engine/quant's grids (STRATA_WRITE_CUDA_GRIDS=1 go test -run TestCUDAGridsMatch rewrites it)", f.path)
		}
	}
}
