package experts

import (
	"fmt"
	"slices"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/model"
)

// layerFFN is one layer's ExpertFFN placed for each stack its experts run on: the file's
// stacks are indexed by expert id, the pinned and VRAM slot stacks by slot, so each gets its
// biases in its own order. pinDev is the pinned slots' biases on the device, for the pinned
// experts it reads over PCIe (the arena holds the matrices only); helper those of each helper
// GPU's slots, on that GPU. bias keeps the file's bias stacks, whose rows a swap copies into
// the slots and a batch into the streaming ring.
type layerFFN struct {
	file, pinned, vram, pinDev *compute.ExpertFFN
	helper                     [2]*compute.ExpertFFN
	bias                       [3]compute.WeightSpec
}

// UseFFN gives layer l's experts biases and the clamped SwiGLU. The biases of the pinned
// and VRAM experts are copied into slot order (a few KB per expert; the VRAM ones into
// float32 stacks on the device, rewritten with the slot on a swap; the pinned ones also on
// the device when it reads the pinned experts over PCIe; a helper GPU's on that GPU, which
// keeps its experts). The streaming ring gets bias stacks of its own, which each batch
// rewrites with the rows of the experts it streams.
func (c *Cache) UseFFN(l int, ffn model.ExpertFFN) error {
	if l < 0 || l >= c.sh.Layers || c.lays[l] == nil {
		return fmt.Errorf("experts: expert biases for layer %d, which is not placed", l)
	}
	L := c.lays[l]
	file := &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
	pinned := &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
	vram := &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
	var pinDev *compute.ExpertFFN
	if L.pinDev[0] != nil {
		pinDev = &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
	}
	rg := c.rings[keyOf(L.file)]
	var slots []int     // expert of each pinned slot
	var vslots []int    // expert of each VRAM slot
	var hslots [2][]int // expert of each helper GPU's slot
	var helper [2]*compute.ExpertFFN
	for e := range c.sh.Experts {
		switch i := c.sh.Index(ID{l, e}); c.tier[i] {
		case TierPinned:
			slots = append(slots, e)
		case TierVRAM:
			vslots = append(vslots, e)
		case TierHelper:
			h := c.cfg.HelperOf[i]
			hslots[h] = append(hslots[h], e)
		}
	}
	bySlot := func(a, b int) int { return int(c.slot[c.sh.Index(ID{l, a})] - c.slot[c.sh.Index(ID{l, b})]) }
	slices.SortFunc(vslots, bySlot)
	for h := range hslots {
		slices.SortFunc(hslots[h], bySlot)
		if len(hslots[h]) > 0 {
			helper[h] = &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
		}
	}
	var bias [3]compute.WeightSpec
	for m, s := range ffn.Bias {
		if s.Data == nil {
			continue
		}
		if s.Rows != 1 || s.Experts != c.sh.Experts || s.ExpertStride != 0 {
			return fmt.Errorf("experts: bias %q is %d x %d x %d, want one row for each of %d experts", s.Name, s.Experts, s.Rows, s.Cols, c.sh.Experts)
		}
		w, err := c.host.Place(s)
		if err != nil {
			return err
		}
		*biasOf(file, m) = w
		bias[m] = s
		if len(slots) > 0 {
			if *biasOf(pinned, m), err = c.host.Place(rowsOf(s, slots, "pinned slots")); err != nil {
				return err
			}
			if pinDev != nil {
				if *biasOf(pinDev, m), err = c.dev.Place(rowsOf(s, slots, "pinned slots, device")); err != nil {
					return err
				}
			}
		}
		if len(vslots) > 0 {
			if *biasOf(vram, m), err = c.dev.Place(rowsOf(s, vslots, "VRAM slots")); err != nil {
				return err
			}
		}
		for h, es := range hslots {
			if len(es) == 0 {
				continue
			}
			if *biasOf(helper[h], m), err = c.cfg.Helpers[h].Place(rowsOf(s, es, fmt.Sprintf("helper GPU %d slots", h+1))); err != nil {
				return fmt.Errorf("experts: helper GPU %d: %w", h+1, err)
			}
		}
		if rg != nil && rg.bias[m] == nil {
			// Layers of one shape share the ring, and so its bias stacks (zeros until a batch
			// writes them).
			zs := s
			zs.Name, zs.Experts = s.Name+" (streaming ring)", rg.n
			zs.Data = make([]byte, rg.n*(len(s.Data)/s.Experts))
			if rg.bias[m], err = c.dev.Place(zs); err != nil {
				return fmt.Errorf("experts: streaming ring: %w", err)
			}
		}
	}
	L.ffn = layerFFN{file: file, pinned: pinned, vram: vram, pinDev: pinDev, helper: helper, bias: bias}
	return nil
}

// ringFFN is the layer's biases and activation on the streaming ring's slots (nil for a
// layer without expert biases: the plain SwiGLU).
func (c *Cache) ringFFN(L *layerCache, rg *ring) *compute.ExpertFFN {
	if L.ffn.file == nil {
		return nil
	}
	ffn := &compute.ExpertFFN{Limit: L.ffn.file.Limit, Alpha: L.ffn.file.Alpha}
	for m, s := range L.ffn.bias {
		if s.Data != nil {
			*biasOf(ffn, m) = rg.bias[m]
		}
	}
	return ffn
}

// writeRingBias copies the bias rows of the round's experts (ring slot base+j holds
// round[j]) into the ring's bias stacks; work queued afterwards sees them, as it does the
// matrices.
func (c *Cache) writeRingBias(L *layerCache, rg *ring, round []int32, base int) error {
	for m, s := range L.ffn.bias {
		if s.Data == nil {
			continue
		}
		if rg.bias[m] == nil {
			return fmt.Errorf("experts: %s: the streaming ring has no bias stack", s.Name)
		}
		per := len(s.Data) / s.Experts
		writes := make([]compute.SlotWrite, len(round))
		for j, e := range round {
			writes[j] = compute.SlotWrite{Slot: base + j, Data: s.Data[int(e)*per : (int(e)+1)*per]}
		}
		if err := c.dev.WriteSlots(rg.bias[m], writes); err != nil {
			return fmt.Errorf("experts: bias %s into the streaming ring: %w", s.Name, err)
		}
	}
	return nil
}

// rowsOf is bias stack s with only the rows of experts es, in that order.
func rowsOf(s compute.WeightSpec, es []int, what string) compute.WeightSpec {
	per := len(s.Data) / s.Experts
	rs := s
	rs.Name, rs.Experts, rs.Data = s.Name+" ("+what+")", len(es), make([]byte, 0, len(es)*per)
	for _, e := range es {
		rs.Data = append(rs.Data, s.Data[e*per:(e+1)*per]...)
	}
	return rs
}

// swapBias copies expert e's bias rows into slot of the layer's slot bias stacks st (of the
// VRAM slots on dev, or the pinned ones on the host); nothing without biases.
func (c *Cache) swapBias(L *layerCache, st *compute.ExpertFFN, e, slot int, onDev bool) error {
	if st == nil {
		return nil
	}
	for m, s := range L.ffn.bias {
		w := *biasOf(st, m)
		if w == nil {
			continue
		}
		per := len(s.Data) / s.Experts
		row := s.Data[e*per : (e+1)*per]
		if onDev {
			if err := c.dev.WriteSlots(w, []compute.SlotWrite{{Slot: slot, Data: row}}); err != nil {
				return fmt.Errorf("experts: bias of %s: %w", ID{L.l, e}, err)
			}
			continue
		}
		cw, ok := w.(*cpu.Weight)
		if !ok {
			return fmt.Errorf("experts: bias %s: %T is not a host weight", s.Name, w)
		}
		if err := cw.SetExpert(slot, row); err != nil {
			return fmt.Errorf("experts: bias of %s: %w", ID{L.l, e}, err)
		}
	}
	return nil
}

func biasOf(f *compute.ExpertFFN, m int) *compute.Weight {
	return [3]*compute.Weight{&f.GateBias, &f.UpBias, &f.DownBias}[m]
}

// UseFFN gives the layer's experts biases and the clamped SwiGLU (see Cache.UseFFN).
func (le *layerExperts) UseFFN(ffn model.ExpertFFN) error { return le.c.UseFFN(le.l, ffn) }
