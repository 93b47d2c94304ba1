package quant

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// cudaGridsFile is the CUDA kernels' copy of the grids, written from these tables.
const cudaGridsFile = "../../cuda/kernels/iq_grids.cuh"

// cudaGridsSource is iq_grids.cuh's text: ggml's grid words as device arrays.
func cudaGridsSource() string {
	var b strings.Builder
	b.WriteString("// iq_grids.cuh: the IQ2/IQ3 grids as ggml's words (byte j = coordinate j), generated from\n")
	b.WriteString("// engine/quant's tables by TestCUDAGridsMatch (STRATA_WRITE_CUDA_GRIDS=1 rewrites it): do not edit.\n")
	b.WriteString("#pragma once\n#include <stdint.h>\n")
	w64 := func(name string, n int, f func(int) uint64) {
		fmt.Fprintf(&b, "\nstatic const __device__ uint64_t %s[%d] = {", name, n)
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
		fmt.Fprintf(&b, "\nstatic const __device__ uint32_t %s[%d] = {", name, n)
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
	return b.String()
}

// TestCUDAGridsMatch: the kernels' grids are these grids.
func TestCUDAGridsMatch(t *testing.T) {
	want := cudaGridsSource()
	if os.Getenv("STRATA_WRITE_CUDA_GRIDS") == "1" {
		if err := os.WriteFile(cudaGridsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(cudaGridsFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from engine/quant's grids (STRATA_WRITE_CUDA_GRIDS=1 go test -run TestCUDAGridsMatch rewrites it)", cudaGridsFile)
	}
}
