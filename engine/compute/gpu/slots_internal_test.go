package gpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
	"strata/platform"
)

// slotsFixture is a backend with a stack of Q8_0 expert slots and host memory outside the
// Go heap, part of it registered.
type slotsFixture struct {
	b   *Backend
	w   compute.Weight
	mem []byte
	per int // bytes of one expert
}

// newSlotsFixture makes slots experts of rows x cols (Q8_0: rows*cols/32*34 bytes each) and
// n bytes of host memory whose first reg bytes are registered; stage > 0 shrinks the
// staging ring to two buffers of stage bytes.
func newSlotsFixture(t testing.TB, rows, cols, slots, n, reg, stage int) slotsFixture {
	t.Helper()
	// The memory comes first: cleanups run last-in first-out, so the backend (which
	// unregisters the memory at Close) closes before the memory goes.
	mem, err := platform.AlignedAlloc(n, 4096)
	if err != nil {
		t.Skipf("no aligned host memory here: %v", err)
	}
	t.Cleanup(func() { _ = platform.FreeAligned(mem) })
	b := newForTest(t)
	if stage > 0 {
		b.SetStaging(2, stage)
	}
	if err := b.RegisterHost(mem[:reg]); err != nil {
		t.Fatal(err)
	}
	spec := compute.WeightSpec{Name: fmt.Sprintf("test slots %dx%d", rows, cols), Type: quant.Q8_0, Rows: rows, Cols: cols}
	w, err := b.NewSlots(spec, slots)
	if err != nil {
		t.Fatal(err)
	}
	return slotsFixture{b: b, w: w, mem: mem, per: rows * cols / 32 * 34}
}

// randomBytes fills p with bytes of seed.
func randomBytes(p []byte, seed uint64) {
	_, _ = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(p)
}

// checkSlots reads every write's slot back and compares it byte for byte with want.
func checkSlots(t *testing.T, b *Backend, w compute.Weight, writes []compute.SlotWrite, want [][]byte) {
	t.Helper()
	for i, s := range writes {
		got, err := b.ReadSlot(w, s.Slot)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("slot %d: read back differs from what was written (first byte %#x, want %#x)", s.Slot, got[0], want[i][0])
		}
	}
}

// TestRegisteredView checks the lookup that HostStack and WriteSlots' direct copies share:
// only a slice entirely inside one registered buffer has a device view, at its offset.
func TestRegisteredView(t *testing.T) {
	mem := make([]byte, 3<<12)
	b := &Backend{hostBufs: []*cuda.HostBuffer{{Bytes: mem[:1<<12], Dev: 0x10000}, {Bytes: mem[2<<12:], Dev: 0x90000}}}
	cases := []struct {
		name string
		p    []byte
		dev  cuda.DevicePtr
		ok   bool
	}{
		{"first buffer whole", mem[:1<<12], 0x10000, true},
		{"inside the first", mem[100:200], 0x10000 + 100, true},
		{"inside the second", mem[2<<12+5 : 2<<12+9], 0x90000 + 5, true},
		{"ends at the second's end", mem[3<<12-1:], 0x90000 + 1<<12 - 1, true},
		{"runs past the first", mem[1<<12-4 : 1<<12+4], 0, false},
		{"between them", mem[1<<12 : 1<<12+8], 0, false},
		{"starts before the second", mem[2<<12-1 : 2<<12+1], 0, false},
		{"empty", mem[10:10], 0, false},
		{"plain Go memory", make([]byte, 64), 0, false},
	}
	for _, c := range cases {
		dev, ok := b.registeredView(c.p)
		if ok != c.ok || dev != c.dev {
			t.Errorf("%s: registeredView = %#x, %v; want %#x, %v", c.name, uint64(dev), ok, uint64(c.dev), c.ok)
		}
	}
}

// TestWriteSlotsSources writes experts from registered memory (direct copies), plain
// memory (the staging ring), both in one call, and from a slice that runs past the end of
// registered memory (staged), and reads every slot back. The experts are not a multiple of
// the small staging buffers, so staged writes split into pieces.
func TestWriteSlotsSources(t *testing.T) {
	const slots, stride = 8, 20 << 12
	// 81,600-byte experts: one 64 KiB piece and a short one. Only the first half of the
	// memory is registered: a source across its end is not.
	fx := newSlotsFixture(t, 300, 256, slots, 2*slots*stride, slots*stride, 64<<10)
	mem, per := fx.mem, fx.per
	registered := func(i int) []byte { return mem[i*stride : i*stride+per] }
	plain := func(int) []byte { return make([]byte, per) }
	cases := []struct {
		name string
		n    int // writes
		src  func(i int) []byte
	}{
		{"registered", slots, registered},
		{"plain", slots, plain},
		{"mixed", slots, func(i int) []byte {
			if i%2 == 0 {
				return registered(i)
			}
			return plain(i)
		}},
		{"straddling", 1, func(int) []byte { return mem[slots*stride-per/2 : slots*stride-per/2+per] }},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var writes []compute.SlotWrite
			var want [][]byte
			for i := range c.n {
				src := c.src(i)
				randomBytes(src, uint64(100*k+i))
				// Slots in reverse order, so a slot's contents come from another index.
				writes = append(writes, compute.SlotWrite{Slot: slots - 1 - i, Data: src})
				want = append(want, bytes.Clone(src))
			}
			if err := fx.b.WriteSlots(fx.w, writes); err != nil {
				t.Fatal(err)
			}
			if c.name == "registered" && fx.b.stage != nil {
				t.Error("writes from registered memory went through the staging ring")
			}
			checkSlots(t, fx.b, fx.w, writes, want)
		})
	}
}

// TestWriteSlotsCopiesBeforeReturn overwrites registered sources as soon as WriteSlots
// returns, as swapLayer does with the pinned slot an expert just left: the slots must hold
// the old contents, so the direct copies are done by then.
func TestWriteSlotsCopiesBeforeReturn(t *testing.T) {
	const slots = 16
	per := 576 * 2048 / 32 * 34
	fx := newSlotsFixture(t, 576, 2048, slots, slots*per, slots*per, 0)
	for round := range 3 {
		writes, want := registeredWrites(fx, slots, uint64(round*slots))
		if err := fx.b.WriteSlots(fx.w, writes); err != nil {
			t.Fatal(err)
		}
		for i := range fx.mem {
			fx.mem[i] = ^fx.mem[i]
		}
		checkSlots(t, fx.b, fx.w, writes, want)
	}
}

// registeredWrites fills the first n experts of fx's memory with bytes of seed and returns
// writes of them into slots 0..n-1, and a copy of their bytes.
func registeredWrites(fx slotsFixture, n int, seed uint64) ([]compute.SlotWrite, [][]byte) {
	var writes []compute.SlotWrite
	var want [][]byte
	for i := range n {
		src := fx.mem[i*fx.per : (i+1)*fx.per]
		randomBytes(src, seed+uint64(i))
		writes = append(writes, compute.SlotWrite{Slot: i, Data: src})
		want = append(want, bytes.Clone(src))
	}
	return writes, want
}

// notGPU is a weight of another backend.
type notGPU struct{ compute.Weight }

// TestWriteSlotsRejectsBadWrites checks that writes of the wrong size, to a slot out of
// range or into another backend's weight give an error, not a panic, and that a call with
// one bad write writes nothing.
func TestWriteSlotsRejectsBadWrites(t *testing.T) {
	per := 64 * 256 / 32 * 34
	fx := newSlotsFixture(t, 64, 256, 4, 4*per, 4*per, 0)
	checkRejects(t, fx, fx.b.WriteSlots)
}

// checkRejects runs bad writes through write (WriteSlots or a variant of it), each after a
// good one, and then checks that slot 0 still holds what it held before.
func checkRejects(t *testing.T, fx slotsFixture, write func(compute.Weight, []compute.SlotWrite) error) {
	t.Helper()
	per, mem := fx.per, fx.mem
	old := make([]byte, per)
	randomBytes(old, 1)
	if err := fx.b.WriteSlots(fx.w, []compute.SlotWrite{{Slot: 0, Data: old}}); err != nil {
		t.Fatal(err)
	}
	fresh := mem[:per]
	randomBytes(fresh, 2)
	slots := fx.w.Experts()
	sources := map[string][]byte{"registered": mem, "plain": make([]byte, 2*per)}
	for name, src := range sources {
		bad := map[string]compute.SlotWrite{
			"short":         {Slot: 1, Data: src[:per-1]},
			"long":          {Slot: 1, Data: src[:per+1]},
			"empty":         {Slot: 1, Data: src[:0]},
			"negative slot": {Slot: -1, Data: src[per : 2*per]},
			"slot past end": {Slot: slots, Data: src[per : 2*per]},
		}
		for what, s := range bad {
			if err := write(fx.w, []compute.SlotWrite{{Slot: 0, Data: fresh}, s}); err == nil {
				t.Errorf("%s source, %s write: no error", name, what)
			}
		}
	}
	if err := write(notGPU{}, []compute.SlotWrite{{Slot: 0, Data: fresh}}); err == nil {
		t.Error("a weight of another backend: no error")
	}
	if err := fx.b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkSlots(t, fx.b, fx.w, []compute.SlotWrite{{Slot: 0}}, [][]byte{old})
}

// BenchmarkWriteSlots uploads 64 experts of 1.2 MiB (a batch's streamed experts) from
// plain memory, through the staging ring, and from registered memory, by direct copies,
// each call waited for on the device.
func BenchmarkWriteSlots(bm *testing.B) {
	const slots = 64
	per := 576 * 2048 / 32 * 34
	fx := newSlotsFixture(bm, 576, 2048, slots, slots*per, slots*per, 0)
	for _, src := range []struct {
		name string
		mem  []byte
	}{{"staged", make([]byte, slots*per)}, {"registered", fx.mem}} {
		randomBytes(src.mem, 3)
		var writes []compute.SlotWrite
		for i := range slots {
			writes = append(writes, compute.SlotWrite{Slot: i, Data: src.mem[i*per : (i+1)*per]})
		}
		bm.Run("src="+src.name, func(bm *testing.B) {
			bm.SetBytes(int64(slots * per))
			for bm.Loop() {
				if err := fx.b.WriteSlots(fx.w, writes); err != nil {
					bm.Fatal(err)
				}
				if err := fx.b.Synchronize(); err != nil {
					bm.Fatal(err)
				}
			}
		})
	}
}
