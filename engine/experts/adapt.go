package experts

import (
	"cmp"
	"fmt"
	"slices"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
)

// Adaptive swaps: the VRAM slots should hold each layer's most-routed experts, but the
// plan's order comes from a saved profile, and there is none on a model's first run (nor
// one that fits every user's chats). So the cache keeps a moving count of every expert's
// routes (its heat: +1 a route, times adaptDecay at each pass) and, every AdaptEvery
// tokens, moves a layer's hottest experts outside VRAM into the slots of its coldest ones.
// A swap costs an expert's upload (2.7 MB for a 30b-a3b one), so it is done only when the
// newcomer is clearly hotter: by adaptGain times, and by adaptZ standard deviations of the
// difference of two route counts (taken as Poisson: sqrt of their sum), since with counts
// this small a plain "hotter than" swaps experts of equal rate back and forth. A pass
// swaps at most 1/adaptMaxShare of a layer's slots for every AdaptEvery tokens since the
// last one: a decode token then pays for at most a few uploads, while the pass after a long
// prompt, whose routes tell the most, may reorder the whole cache at once.
const (
	adaptDecay    = 0.75
	adaptGain     = 1.5
	adaptZ        = 3
	adaptMaxShare = 8
)

// adapt runs one pass of adaptive swaps over every layer with VRAM slots, then decays the
// counts and starts counting tokens again.
func (c *Cache) adapt() {
	c.waitMisses() // they read the arena that swaps rewrite
	c.mu.Lock()
	defer c.mu.Unlock()
	for l, L := range c.lays {
		if L.vram[0] == nil {
			continue
		}
		var out, in []int32 // the layer's VRAM experts, and the others it may take in
		for e := range c.sh.Experts {
			switch c.tier[c.sh.Index(ID{l, e})] {
			case TierVRAM:
				out = append(out, int32(e))
			case TierHelper: // helpers keep theirs
			default:
				in = append(in, int32(e))
			}
		}
		first := c.sh.Index(ID{l, 0})
		heat := c.heat[first : first+c.sh.Experts]
		pairs := pickSwaps(heat, in, out, swapLimit(len(out), c.tokens, c.cfg.AdaptEvery), c.pays)
		if len(pairs) == 0 {
			continue
		}
		if err := c.swapLayer(l, L, pairs); err != nil {
			c.err.Set(err)
			return
		}
		c.stats.Swaps += uint64(len(pairs))
		c.tune.interrupt() // the uploads lengthen this step
	}
	for i := range c.heat {
		c.heat[i] *= adaptDecay
	}
	c.tokens = 0
}

// swapLimit is how many swaps a pass may make in a layer of slots VRAM slots, tokens after
// the last pass (at least one).
func swapLimit(slots, tokens, every int) int {
	return max(1, slots*tokens/(adaptMaxShare*max(every, 1)))
}

// pickSwaps pairs the hottest candidates (in) with the coldest residents (out), by heat
// (indexed by expert), while pays says the swap is worth it (paysToSwap), and at most limit
// pairs: {in, out} each. It reorders in and out.
func pickSwaps(heat []float32, in, out []int32, limit int, pays func(hin, hout float32) bool) [][2]int32 {
	slices.SortStableFunc(in, func(a, b int32) int { return cmp.Compare(heat[b], heat[a]) })
	slices.SortStableFunc(out, func(a, b int32) int { return cmp.Compare(heat[a], heat[b]) })
	var pairs [][2]int32
	for j := range min(len(in), len(out), limit) {
		if !pays(heat[in[j]], heat[out[j]]) {
			break
		}
		pairs = append(pairs, [2]int32{in[j], out[j]})
	}
	return pairs
}

// paysToSwap says whether an expert of heat hin is clearly hotter than one of heat hout.
func paysToSwap(hin, hout float32) bool {
	d := float64(hin - hout)
	return hin >= adaptGain*hout && d > 0 && d*d >= adaptZ*adaptZ*float64(hin+hout)
}

// swapLayer moves each pair's first expert into the VRAM slot of its second, which takes
// the newcomer's old place (its pinned slot, or the file). A layer's uploads go as one
// WriteSlots a matrix, so that the stager overlaps its copies across the pairs instead of
// waiting on each expert's three. Every VRAM write is staged before any pinned slot a
// newcomer leaves is overwritten (WriteSlots copies its sources before it returns).
func (c *Cache) swapLayer(l int, L *layerCache, pairs [][2]int32) error {
	var toVRAM, toPinned [3][]compute.SlotWrite
	for _, p := range pairs {
		in, victim := int(p[0]), int(p[1])
		ii, vi := c.sh.Index(ID{l, in}), c.sh.Index(ID{l, victim})
		for m := range 3 {
			toVRAM[m] = append(toVRAM[m], compute.SlotWrite{Slot: int(c.slot[vi]), Data: c.bytesOf(L, m, in)})
			if c.tier[ii] == TierPinned {
				toPinned[m] = append(toPinned[m], compute.SlotWrite{Slot: int(c.slot[ii]), Data: L.matrix(m, victim)})
			}
		}
	}
	for m := range 3 {
		if err := c.dev.WriteSlots(L.vram[m], toVRAM[m]); err != nil {
			return fmt.Errorf("experts: layer %d: swapping %d experts in: %w", l, len(pairs), err)
		}
	}
	for m := range 3 {
		if err := c.writePinned(L, m, toPinned[m]); err != nil {
			return fmt.Errorf("experts: layer %d: moving %d experts out to pinned slots: %w", l, len(toPinned[m]), err)
		}
	}
	for _, p := range pairs {
		in, victim := int(p[0]), int(p[1])
		ii, vi := c.sh.Index(ID{l, in}), c.sh.Index(ID{l, victim})
		vslot := c.slot[vi]
		if err := c.swapBias(L, L.ffn.vram, in, int(vslot), true); err != nil {
			return err
		}
		if c.tier[ii] == TierPinned {
			pslot := c.slot[ii]
			if err := c.swapBias(L, L.ffn.pinned, victim, int(pslot), false); err != nil {
				return err
			}
			if err := c.swapBias(L, L.ffn.pinDev, victim, int(pslot), true); err != nil {
				return err
			}
			c.tier[vi], c.slot[vi] = TierPinned, pslot
		} else {
			c.tier[vi], c.slot[vi] = TierCold, -1
		}
		c.tier[ii], c.slot[ii] = TierVRAM, vslot
	}
	return nil
}

// writePinned replaces pinned slots' matrix m, through the device when it may be reading
// them.
func (c *Cache) writePinned(L *layerCache, m int, writes []compute.SlotWrite) error {
	switch {
	case len(writes) == 0:
	case L.pinDev[m] != nil:
		return c.dev.WriteSlots(L.pinDev[m], writes)
	default:
		for _, w := range writes {
			copy(L.pinCPU[m].(*cpu.Weight).ExpertBytes(w.Slot), w.Data)
		}
	}
	return nil
}
