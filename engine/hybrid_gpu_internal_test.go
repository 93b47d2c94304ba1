package engine

import (
	"strings"
	"testing"
)

// TestHybridGPULimits: the GPU runs the published hybrids' Gated DeltaNet shapes and refuses by
// name what its kernels do not take.
func TestHybridGPULimits(t *testing.T) {
	info := ModelInfo{Architecture: "qwen3next", RecurrentLayers: 36, DeltaKeyDim: 128, ConvKernel: 4}
	if why := gpuLacks(info); why != "" {
		t.Errorf("qwen3next-80b-a3b's shapes refused: %s", why)
	}
	for _, tc := range []struct {
		keyDim, conv int
		word         string
	}{{512, 4, "key heads"}, {128, 9, "taps"}} {
		info.DeltaKeyDim, info.ConvKernel = tc.keyDim, tc.conv
		if why := gpuLacks(info); !strings.Contains(why, tc.word) || !strings.Contains(why, "Gated DeltaNet") {
			t.Errorf("key dim %d, %d taps: refusal %q does not say what", tc.keyDim, tc.conv, why)
		}
	}
}
