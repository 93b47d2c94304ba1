package experts

import (
	"fmt"

	"strata/engine/compute"
	"strata/engine/quant"
)

// LayerSpecs are one layer's expert stacks as the model file holds them (gate, up, down;
// Data is not read) and, for gpt-oss, their bias stacks (Cols 0: none).
type LayerSpecs struct {
	Mats, Bias [3]compute.WeightSpec
}

// PlacedBytesFunc is what a device's Place takes for a rows x cols tensor of typ stored in
// fileBytes (gpu.PlacedBytes).
type PlacedBytesFunc func(typ quant.Type, rows, cols int, fileBytes int64) int64

// DeviceBytes is what Layer and UseFFN will ask the cache's main device for, in all: each
// layer's three VRAM slot stacks, in the layer's own types (a quantisation mix stores
// layers' experts in different sizes), a streaming ring for each distinct shape of a layer's
// stacks (as Layer shares them), and with biases (gpt-oss) their float32 rows for the VRAM
// slots, the pinned slots the device reads and each ring. Each allocation is rounded up to
// compute.SlotAlign, as the GPU backend carves them from its region (ReserveRegion); the
// engine adds the model's other weights and reserves the sum before it loads the model.
func (c *Cache) DeviceBytes(layers []LayerSpecs, placed PlacedBytesFunc) (int64, error) {
	if len(layers) != c.sh.Layers {
		return 0, fmt.Errorf("experts: %d layers of expert specs for a plan of %d", len(layers), c.sh.Layers)
	}
	perExpert := func(s compute.WeightSpec) (int64, error) {
		rb, err := quant.RowBytes(s.Type, s.Cols)
		if err != nil {
			return 0, fmt.Errorf("experts: %s: %w", s.Name, err)
		}
		return int64(rb) * int64(s.Rows), nil
	}
	var total int64
	// stacks adds the three stacks of n slots of L's matrices, and of its biases those
	// counted as placed on the device.
	stacks := func(L LayerSpecs, n int, matrices, biases bool) error {
		for m := range 3 {
			if matrices {
				per, err := perExpert(L.Mats[m])
				if err != nil {
					return err
				}
				total += compute.SlotAligned(per * int64(n))
			}
			if b := L.Bias[m]; biases && b.Cols > 0 {
				per, err := perExpert(b)
				if err != nil {
					return err
				}
				total += compute.SlotAligned(placed(b.Type, b.Rows, b.Cols*n, per*int64(n)))
			}
		}
		return nil
	}
	rings := map[ringKey]bool{}
	for l, L := range layers {
		var nv, np int
		for e := range c.sh.Experts {
			switch c.tier[c.sh.Index(ID{l, e})] {
			case TierVRAM:
				nv++
			case TierPinned:
				np++
			}
		}
		if nv > 0 {
			if err := stacks(L, nv, true, true); err != nil {
				return 0, err
			}
		}
		if np > 0 && c.cfg.PinnedMapped { // the matrices stay in the arena
			if err := stacks(L, np, false, true); err != nil {
				return 0, err
			}
		}
		if k := keyOf(L.Mats); c.cfg.StreamSlots > 0 && nv < c.sh.Experts && !rings[k] {
			rings[k] = true
			if err := stacks(L, min(c.cfg.StreamSlots, c.sh.Experts), true, true); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}
