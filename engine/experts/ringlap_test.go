package experts_test

import (
	"fmt"
	"testing"
	"unsafe"

	"strata/engine/compute"
	"strata/engine/experts"
)

// lapMode is how a tier case's device queues slot writes beside its kernels.
type lapMode uint8

const (
	lapNone         lapMode = iota // HostDevice: no asynchronous writes
	lapRegistered                  // lapDevice with the RAM arena registered
	lapUnregistered                // lapDevice refusing every source (nothing registered)
)

// lapDevice is HostDevice with the GPU backend's asynchronous slot writes: WriteSlotsAsync
// takes sources only from memory given to RegisterHost and holds each copy back until its
// wait, as the GPU's copy stream may not have run it before. A MoE that reads a slot with a
// copy not waited for is a race (on the GPU it reads bytes in flight, or the old expert).
type lapDevice struct {
	experts.HostDevice
	registered [][]byte
	pending    map[lapSlot]int // copies queued into a slot and not waited for
	// async and refused count WriteSlotsAsync calls queued and refused, waits the waits;
	// races the MoEs that read a slot with a pending copy, overlapped those that ran while a
	// copy into other slots was pending (the next round's, queued before them).
	async, refused, waits, races, overlapped int
}

type lapSlot struct {
	w    compute.Weight
	slot int
}

func newLapDevice(hd experts.HostDevice) *lapDevice {
	return &lapDevice{HostDevice: hd, pending: map[lapSlot]int{}}
}

// RegisterHost remembers mem as memory the asynchronous copies may read.
func (d *lapDevice) RegisterHost(mem []byte) error {
	d.registered = append(d.registered, mem)
	return nil
}

// WriteSlotsAsync queues writes, to be done at the wait.
func (d *lapDevice) WriteSlotsAsync(w compute.Weight, writes []compute.SlotWrite) (func() error, error) {
	for _, s := range writes {
		if !d.isRegistered(s.Data) {
			d.refused++
			return nil, fmt.Errorf("lap device: slot %d: source not registered", s.Slot)
		}
	}
	d.async++
	for _, s := range writes {
		d.pending[lapSlot{w, s.Slot}]++
	}
	waited := false
	return func() error {
		if waited {
			return nil
		}
		waited = true
		d.waits++
		for _, s := range writes {
			d.pending[lapSlot{w, s.Slot}]--
		}
		return d.HostDevice.WriteSlots(w, writes)
	}, nil
}

// isRegistered says whether p lies inside memory given to RegisterHost.
func (d *lapDevice) isRegistered(p []byte) bool {
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for _, m := range d.registered {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if len(p) > 0 && at >= lo && at+uintptr(len(p)) <= lo+uintptr(len(m)) {
			return true
		}
	}
	return false
}

// MoE counts a race when a slot it reads has a copy pending, then runs on the CPU.
func (d *lapDevice) MoE(dst, x compute.Buf, gate, up, down compute.Weight, ffn *compute.ExpertFFN, r *compute.Routes) {
	read := map[lapSlot]bool{}
	for _, w := range []compute.Weight{gate, up, down} {
		for _, id := range r.IDs[:r.N*r.K] {
			k := lapSlot{w, int(id)}
			read[k] = true
			if d.pending[k] > 0 {
				d.races++
			}
		}
	}
	for k, n := range d.pending {
		if n > 0 && !read[k] {
			d.overlapped++
			break
		}
	}
	d.HostDevice.MoE(dst, x, gate, up, down, ffn, r)
}

// lapStandIn is the device a tier case runs on: hd, or a lapDevice around it (with the
// arena registered for lapRegistered), returned too.
func lapStandIn(t testing.TB, tc tierCase, hd experts.HostDevice, arena *experts.Arena) (experts.Device, *lapDevice) {
	t.Helper()
	if tc.lap == lapNone {
		return hd, nil
	}
	d := newLapDevice(hd)
	if tc.lap == lapRegistered && arena != nil {
		if err := d.RegisterHost(arena.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return d, d
}

// checkLap checks what a tier case's batches did with the asynchronous writes: no MoE read
// a slot before its copies were waited for, every queued write was waited for, and rounds
// overlapped exactly where every streamed expert lies in the registered arena.
func checkLap(t *testing.T, tc tierCase, d *lapDevice, st experts.CacheStats) {
	t.Helper()
	if d == nil {
		return
	}
	t.Logf("lap device: %d writes queued, %d refused, %d waits, %d MoEs overlapped a copy, %d rounds overlapped", d.async, d.refused, d.waits, d.overlapped, st.Overlapped)
	if d.races != 0 {
		t.Errorf("%d MoEs read a ring slot before the copy into it was waited for", d.races)
	}
	if d.waits != d.async {
		t.Errorf("%d asynchronous writes queued, %d waited for", d.async, d.waits)
	}
	switch {
	case overlaps(tc):
		if d.async == 0 || st.Overlapped == 0 || d.overlapped == 0 {
			t.Errorf("every streamed expert pinned and registered, yet %d writes queued, %d rounds and %d MoEs overlapped", d.async, st.Overlapped, d.overlapped)
		}
	case tc.pin == 0:
		// Every streamed expert is cold (the file): not registered, so never offered.
		if d.async+d.refused != 0 || st.Overlapped != 0 {
			t.Errorf("cold experts only, yet %d writes queued and %d refused, %d rounds overlapped", d.async, d.refused, st.Overlapped)
		}
	case tc.lap == lapUnregistered:
		if d.async != 0 || d.refused == 0 || st.Overlapped != 0 {
			t.Errorf("nothing registered: %d writes queued, %d refused (want some), %d rounds overlapped", d.async, d.refused, st.Overlapped)
		}
	}
}

// overlaps says whether tc's streamed rounds overlap: a lap device with the arena
// registered (the GPU backend, whose tests register it), and every expert not in VRAM
// pinned.
func overlaps(tc tierCase) bool {
	return tc.lap == lapRegistered && tc.pin > 0 && tc.vram+tc.pin >= 1 && tc.helper == 0
}

// checkOverlapped fails when tc's rounds should overlap on a GPU backend, which
// implements the asynchronous writes, and none did.
func checkOverlapped(t *testing.T, tc tierCase, st experts.CacheStats) {
	t.Helper()
	if overlaps(tc) && st.Overlapped == 0 {
		t.Error("every streamed expert pinned in the registered arena, yet no round's copies went on the copy stream")
	}
}

// lapCases are tier cases of streamed batches on the lap device: every expert pinned (the
// rounds overlap; with adaptive swaps, which rewrite the arena), pinned and cold (a batch with a cold expert runs the plain rounds), cold
// only, and pinned with nothing registered (each round falls back to WriteSlots).
func lapCases() []tierCase {
	return []tierCase{
		{name: "streamed, all pinned, overlapped", vram: 0.25, pin: 0.75, streamSlots: 4, lap: lapRegistered},
		{name: "streamed, all pinned, odd ring, overlapped", vram: 0.25, pin: 0.75, streamSlots: 5, lap: lapRegistered},
		{name: "streamed, all pinned, overlapped + adaptive swaps", vram: 0.25, pin: 0.75, streamSlots: 4, adapt: 2, lap: lapRegistered},
		{name: "streamed, pinned + cold, overlap falls back", vram: 0.25, pin: 0.25, streamSlots: 4, lap: lapRegistered},
		{name: "streamed, cold only, no overlap", vram: 0.25, streamSlots: 4, lap: lapRegistered},
		{name: "streamed, all pinned, not registered", vram: 0.25, pin: 0.75, streamSlots: 4, lap: lapUnregistered},
	}
}
