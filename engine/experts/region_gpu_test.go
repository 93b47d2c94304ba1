package experts_test

import (
	"errors"
	"fmt"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/model"
	"strata/engine/quant"
)

// TestDeviceBytesOnGPU: a cache of a quantisation mix (TestDeviceBytesMatchesAllocations'
// layers, with biases) on the GPU backend, with the region reserved from DeviceBytes,
// carves every slot stack, ring and bias stack from it: the region is full to the byte,
// nothing was allocated past it, and the backend's used bytes are the region's. It skips
// without a driver.
func TestDeviceBytesOnGPU(t *testing.T) {
	dev, err := gpu.New(gpu.Options{})
	if errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	host := cpu.New(cpu.Options{Threads: 2})
	defer host.Close()
	types := []quant.Type{quant.Q4_K, quant.Q8_0, quant.Q4_K, quant.Q6_K}
	const E, rows, cols, ring = 8, 768, 256, 3
	mats, biases := mixedLayers(t, types, rows, cols, E, true)
	s := experts.Shape{Layers: len(types), Experts: E, GateBytes: 1, UpBytes: 1, DownBytes: 1}
	inVRAM := []int{5, E, 2, 0}
	tier := firstInVRAM(s, inVRAM)
	c, err := experts.NewCache(dev, host, experts.CacheConfig{Shape: s, Tier: tier, StreamSlots: ring, StreamMinTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]experts.LayerSpecs, len(types))
	for l := range mats {
		for m := range 3 {
			specs[l].Mats[m], specs[l].Bias[m] = mats[l][m], biases[l][m]
		}
	}
	n, err := c.DeviceBytes(specs, gpu.PlacedBytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.ReserveRegion(n); err != nil {
		t.Fatal(err)
	}
	for l := range mats {
		le, err := c.Layer(l, mats[l][0], mats[l][1], mats[l][2])
		if err != nil {
			t.Fatal(err)
		}
		if err := le.(model.BiasedExperts).UseFFN(model.ExpertFFN{Bias: biases[l], Limit: 7, Alpha: 1.7}); err != nil {
			t.Fatal(fmt.Errorf("layer %d: %w", l, err))
		}
	}
	if size, used, misses := dev.RegionStats(); size != n || used != n || misses != 0 || dev.UsedBytes() != n {
		t.Errorf("region %d bytes, %d carved, %d allocations past it, backend used %d: want all %d and none past", size, used, misses, dev.UsedBytes(), n)
	}
}
