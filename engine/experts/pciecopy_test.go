package experts_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"unsafe"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/experts"
	"strata/engine/fixtures"
	"strata/engine/model/modeltest"
)

// pinnedCopier is the CPU stand-in device with WriteSlotsPinned, as the GPU has it. Every
// pinned copy must come from the arena; it is done at once (the CPU has no stream) and
// counted. Until the next point where the GPU's stream would have passed a copy (a Read,
// or a WriteSlots into the arena's own stacks, which synchronizes first), the copy's source
// is kept, and a change of the arena's bytes under it fails the test: on the GPU the DMA
// would have read the new bytes.
type pinnedCopier struct {
	experts.HostDevice
	t       testing.TB
	arena   []byte
	copies  int // matrices copied by WriteSlotsPinned
	topSlot int // the highest slot they went to
	flying  []flyingCopy
}

// flyingCopy is a pinned copy's source and its bytes when the copy was queued.
type flyingCopy struct{ src, was []byte }

// newPinnedCopier wraps dev for the arena a (nil: no arena, and no pinned copy can pass).
func newPinnedCopier(t testing.TB, dev experts.HostDevice, a *experts.Arena) *pinnedCopier {
	p := &pinnedCopier{HostDevice: dev, t: t, topSlot: -1}
	if a != nil {
		p.arena = a.Bytes()
	}
	return p
}

// inArena says whether b lies entirely inside the arena.
func (p *pinnedCopier) inArena(b []byte) bool {
	if len(b) == 0 || len(p.arena) == 0 {
		return false
	}
	at, lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(p.arena)))
	return at >= lo && at+uintptr(len(b)) <= lo+uintptr(len(p.arena))
}

// WriteSlotsPinned checks that every source lies in the arena and copies.
func (p *pinnedCopier) WriteSlotsPinned(w compute.Weight, writes []compute.SlotWrite) error {
	for _, s := range writes {
		if !p.inArena(s.Data) {
			return fmt.Errorf("pinned copy into slot %d of %s: the source is not in the arena", s.Slot, w.Name())
		}
	}
	for _, s := range writes {
		p.flying = append(p.flying, flyingCopy{src: s.Data, was: bytes.Clone(s.Data)})
		p.copies++
		p.topSlot = max(p.topSlot, s.Slot)
	}
	return p.HostDevice.WriteSlots(w, writes)
}

// WriteSlots into the arena's stacks is where the GPU synchronizes its stream.
func (p *pinnedCopier) WriteSlots(w compute.Weight, writes []compute.SlotWrite) error {
	if cw, ok := w.(*cpu.Weight); ok && p.inArena(cw.ExpertBytes(0)) {
		p.passed()
	}
	return p.HostDevice.WriteSlots(w, writes)
}

// Read waits for the stream on the GPU.
func (p *pinnedCopier) Read(src compute.Buf, dst []float32) {
	p.passed()
	p.HostDevice.Read(src, dst)
}

// passed is a point the stream has passed every copy queued before: their sources must
// still hold what they held then.
func (p *pinnedCopier) passed() {
	for _, f := range p.flying {
		if !bytes.Equal(f.src, f.was) {
			p.t.Errorf("the arena's bytes under a pinned copy changed before the stream passed it")
			break
		}
	}
	p.flying = p.flying[:0]
}

// deviceFor is the stand-in device a case runs on: dev with WriteSlotsPinned for the cases
// that copy PCIe experts into the ring, else lapStandIn's (dev, or the lap device for the
// lap cases, returned too for checkLap). No case sets two of pcieCopy, lap and asyncMisses; asyncMisses runs on the late device (latemisses_test.go).
func deviceFor(t testing.TB, dev experts.HostDevice, tc tierCase, a *experts.Arena) (experts.Device, *lapDevice) {
	if tc.pcieCopy {
		return newPinnedCopier(t, dev, a), nil
	}
	if tc.asyncMisses {
		return &lateDevice{HostDevice: dev, refuse: tc.lateRefused, refuseAdd: tc.lateAddRefused}, nil
	}
	return lapStandIn(t, tc, dev, a)
}

// checkCopies fails unless experts were copied into the ring exactly when tc asks for it:
// every PCIe expert when the ring holds a step's (a decode step reads one expert a pair
// over PCIe, and only decode steps do), only some with a ring of one slot.
func checkCopies(t *testing.T, st experts.CacheStats, tc tierCase) {
	t.Helper()
	switch {
	case !tc.pcieCopy && st.PCIeCopies != 0:
		t.Errorf("PCIe copies off, yet %d experts were copied into the ring", st.PCIeCopies)
	case tc.pcieCopy && tc.streamSlots < 2 && (st.PCIeCopies == 0 || st.PCIeCopies >= st.PCIe):
		t.Errorf("a ring of one slot: %d of %d PCIe reads copied, want some but not all", st.PCIeCopies, st.PCIe)
	case tc.pcieCopy && tc.streamSlots >= 2 && (st.PCIeCopies == 0 || st.PCIeCopies != st.PCIe):
		t.Errorf("PCIe copies on: %d of %d PCIe reads copied into the ring, want all", st.PCIeCopies, st.PCIe)
	}
}

// TestCachePCIeCopyQueued runs a decode with PCIe copies on the stand-in with
// WriteSlotsPinned: the copies come from the arena (else the step fails), go to ring
// slots, three matrices an expert counted in PCIeCopies, and the logits are those of the
// same placement read in place. On a device without WriteSlotsPinned the knob changes
// nothing.
func TestCachePCIeCopyQueued(t *testing.T) {
	dir := fixtures.Path(t, "qwen3moe-tiny")
	ref := modeltest.LoadReference(t, dir)
	v, ok := ref.Variants["f32"]
	if !ok {
		t.Skip("the fixture has no f32 variant")
	}
	f, h := openVariant(t, filepath.Join(dir, v.File))
	sh := experts.Shape{Layers: h.Layers, Experts: h.Experts}
	rank := neutralRank(sh)
	tiers := plan(sh, rank, 0.3, 0.4)
	p := v.Prompts[0]
	const ringSlots = 8
	run := func(t *testing.T, tc tierCase, copier bool) ([]float32, experts.CacheStats, *pinnedCopier) {
		dev := experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 2, FloatPath: true})}
		host := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
		t.Cleanup(func() { dev.Close(); host.Close() })
		arena := pinnedArena(t, f, sh, tiers, false)
		var d experts.Device = dev
		var pc *pinnedCopier
		if copier {
			pc = newPinnedCopier(t, dev, arena)
			d = pc
		}
		c, net := loadCached(t, f, d, host, tc, sh, tiers, rank, arena, nil)
		_, gl, _ := modeltest.Greedy(t, net, p.Tokens, len(p.Generated), "f32", nil)
		return gl, c.Snapshot().Stats, pc
	}
	tc := tierCase{vram: 0.3, pin: 0.4, pcie: 1, streamSlots: ringSlots, adapt: 2}
	want, _, _ := run(t, tc, false)
	tc.pcieCopy = true
	t.Run("copied", func(t *testing.T) {
		got, st, pc := run(t, tc, true)
		if d := modeltest.MaxAbsDiff(got, want); d > 1e-5 {
			t.Errorf("decode logits differ from the in-place reads' by %.3g", d)
		}
		if pc.copies == 0 || uint64(pc.copies) != 3*st.PCIeCopies {
			t.Errorf("%d matrices copied, %d experts counted (three matrices each)", pc.copies, st.PCIeCopies)
		}
		if pc.topSlot >= ringSlots {
			t.Errorf("a pinned copy went to slot %d of a ring of %d", pc.topSlot, ringSlots)
		}
		if st.Swaps == 0 {
			t.Error("no adaptive swap rewrote a pinned slot")
		}
		t.Logf("%d PCIe reads, %d experts copied, %d swaps", st.PCIe, st.PCIeCopies, st.Swaps)
	})
	t.Run("device without WriteSlotsPinned", func(t *testing.T) {
		got, st, _ := run(t, tc, false)
		if d := modeltest.MaxAbsDiff(got, want); d > 0 {
			t.Errorf("decode logits differ from the in-place reads' by %.3g", d)
		}
		if st.PCIeCopies != 0 {
			t.Errorf("%d experts copied by a device that cannot", st.PCIeCopies)
		}
	})
}
