package experts

import (
	"fmt"

	"strata/engine/compute"
)

// slotsAsync is a device that queues slot writes on a copy stream of its own, beside its
// kernels (compute/gpu): the copies wait on the device for the work queued before them,
// and wait makes the work queued after it wait for the copies, the host waiting for
// neither. On an error nothing of the call is left running (WriteSlots then serves).
type slotsAsync interface {
	WriteSlotsAsync(w compute.Weight, writes []compute.SlotWrite) (wait func() error, err error)
}

// streamLapped runs stream's rounds double-buffered where the device queues slot writes
// beside its kernels and every expert of the batch is pinned in the registered arena
// (cold ones are not registered: stream's plain rounds serve such a batch). The ring's
// halves take turns (round r in half r%2, half a ring's experts a round), and round r+1's
// copies are queued before round r's MoE, so they run while it does: on the device they
// wait for the work queued before them, round r-1's MoE the last to read their half, and
// round r's MoE waits for round r's copies. Bias rows (gpt-oss) are written per half on
// the compute stream, in the same order. It returns the rounds whose copies all went on
// the copy stream (the others fell back to WriteSlots), and false when it does not apply.
func (c *Cache) streamLapped(L *layerCache, rg *ring, dst, x compute.Buf, es []entry, order []int32, n int) (lapped int, ok bool) {
	dev, ok := c.dev.(slotsAsync)
	if !ok || rg.n < 2 || !c.registered(L, order) {
		return 0, false
	}
	ffn := c.ringFFN(L, rg)
	half := rg.n / 2
	var rounds [][]int32
	for lo := 0; lo < len(order); lo += half {
		rounds = append(rounds, order[lo:min(lo+half, len(order))])
	}
	next, err := c.queueRound(dev, L, rg, ffn, es, rounds[0], 0)
	for r := range rounds {
		cur := next
		if err == nil && r+1 < len(rounds) {
			next, err = c.queueRound(dev, L, rg, ffn, es, rounds[r+1], (r+1)%2*half)
		}
		if err == nil {
			err = cur.wait()
		}
		if err != nil {
			c.err.Set(fmt.Errorf("experts: stream: %w", err))
			return lapped, true
		}
		if cur.async {
			lapped++
		}
		c.runHalf(rg, ffn, dst, x, cur, n)
	}
	return lapped, true
}

// registered says whether every expert of order is pinned in the arena the device maps.
func (c *Cache) registered(L *layerCache, order []int32) bool {
	if !c.cfg.PinnedMapped {
		return false
	}
	for _, e := range order {
		if c.tier[c.sh.Index(ID{L.l, int(e)})] != TierPinned {
			return false
		}
	}
	return true
}

// lapRound is a round whose copies are queued: its entries on their ring slots (from slot
// base), and the waits for its copies.
type lapRound struct {
	sub   []entry
	base  int
	waits []func() error
	async bool // every matrix was queued beside the kernels (none fell back to WriteSlots)
}

// wait makes the device's next work wait for the round's copies.
func (lr lapRound) wait() error {
	for _, w := range lr.waits {
		if err := w(); err != nil {
			return err
		}
	}
	return nil
}

// queueRound queues round's experts into the ring from slot base: the bias rows first on
// the compute stream, then the matrices on the copy stream, or through WriteSlots where
// the device refuses them (on the compute stream too, so after the MoE queued before).
func (c *Cache) queueRound(dev slotsAsync, L *layerCache, rg *ring, ffn *compute.ExpertFFN, es []entry, round []int32, base int) (lapRound, error) {
	// Every expert is pinned (registered): no cold reads, their bytes come from the arena.
	writes, sub := roundSlots(es, round, base, c.srcOf(L, nil))
	lr := lapRound{sub: sub, base: base, async: true}
	if ffn != nil {
		if err := c.writeRingBias(L, rg, round, base); err != nil {
			return lr, err
		}
	}
	for m := range 3 {
		wait, err := dev.WriteSlotsAsync(rg.st[m], writes[m])
		if err == nil {
			lr.waits = append(lr.waits, wait)
			continue
		}
		lr.async = false
		if err := c.dev.WriteSlots(rg.st[m], writes[m]); err != nil {
			return lr, err
		}
	}
	return lr, nil
}

// runHalf runs a round on the ring as runOn does, but routesOf pads short routes with
// slot 0, in the other half when the round is not, where that half's copies may be
// writing (a weight-0 pad would still read bytes in flight): these pad with the round's
// first slot. No entry of a round from base > 0 is on slot 0.
func (c *Cache) runHalf(rg *ring, ffn *compute.ExpertFFN, dst, x compute.Buf, lr lapRound, n int) {
	if len(lr.sub) == 0 {
		return
	}
	r := routesOf(lr.sub, n)
	if lr.base > 0 {
		for i, id := range r.IDs {
			if id == 0 {
				r.IDs[i] = int32(lr.base)
			}
		}
	}
	c.dev.MoE(dst, x, rg.st[0], rg.st[1], rg.st[2], ffn, r)
}
