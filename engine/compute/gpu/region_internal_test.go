package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
)

// regionCase is a few weights and slot stacks of sizes that are not multiples of
// compute.SlotAlign, and what each takes of a region.
type regionCase struct {
	weights []compute.WeightSpec
	stacks  []compute.WeightSpec // Experts is the slots asked for
	bytes   int64                // the region they fill, each rounded up to SlotAlign
}

func newRegionCase(t *testing.T) regionCase {
	t.Helper()
	var c regionCase
	for i, rows := range []int{3, 17, 1} {
		cols := 64 * (i + 1)
		typ := quant.Q8_0
		if rows == 1 {
			typ = quant.F32 // a norm's vector
		}
		rb, err := quant.RowBytes(typ, cols)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, rb*rows)
		randomBytes(data, uint64(i+1))
		s := compute.WeightSpec{Name: fmt.Sprintf("region weight %d", i), Type: typ, Rows: rows, Cols: cols, Data: data}
		c.weights = append(c.weights, s)
		c.bytes += compute.SlotAligned(PlaceBytes(s))
	}
	for i, slots := range []int{5, 2, 7} {
		s := compute.WeightSpec{Name: fmt.Sprintf("region stack %d", i), Type: quant.Q8_0, Rows: 9 + i, Cols: 96, Experts: slots}
		_, per, err := slotSpec(s, slots)
		if err != nil {
			t.Fatal(err)
		}
		c.stacks = append(c.stacks, s)
		c.bytes += compute.SlotAligned(int64(per * slots))
	}
	return c
}

// TestRegionCarvesPlaceAndSlots: weights (Place) and slot stacks (NewSlots) land inside the
// region ReserveRegion made, one after the other at SlotAlign steps, without overlapping
// (the weights read back unchanged once the stacks are written); the backend's used bytes
// are the region's and stay so; what does not fit gets an allocation of its own, counted
// as before; a second region and one beyond the budget are refused.
func TestRegionCarvesPlaceAndSlots(t *testing.T) {
	b := newForTest(t)
	c := newRegionCase(t)
	if err := b.ReserveRegion(c.bytes); err != nil {
		t.Fatal(err)
	}
	if b.UsedBytes() != c.bytes {
		t.Fatalf("used %d bytes after reserving %d", b.UsedBytes(), c.bytes)
	}
	var at int64 // the region's next free byte
	carved := func(w compute.Weight, n int64) {
		t.Helper()
		p := w.(*Weight).p
		if !b.inRegion(p, n) || int64(p-b.region.p) != at || int64(p)%compute.SlotAlign != 0 {
			t.Fatalf("%s at %#x (%d bytes): not the region's next %d-aligned piece (region %#x, next at %d)", w.Name(), uint64(p), n, compute.SlotAlign, uint64(b.region.p), at)
		}
		at += compute.SlotAligned(n)
	}
	var placed []compute.Weight
	for _, s := range c.weights {
		w, err := b.Place(s)
		if err != nil {
			t.Fatal(err)
		}
		carved(w, PlaceBytes(s))
		placed = append(placed, w)
	}
	for _, s := range c.stacks {
		w, err := b.NewSlots(s, s.Experts)
		if err != nil {
			t.Fatal(err)
		}
		per := w.(*Weight).stride
		carved(w, int64(per*s.Experts))
		writes := make([]compute.SlotWrite, s.Experts)
		for k := range writes {
			writes[k] = compute.SlotWrite{Slot: k, Data: bytes.Repeat([]byte{0xa5}, per)}
		}
		if err := b.WriteSlots(w, writes); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range placed {
		got, err := b.ReadSlot(w, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := c.weights[i].Data
		if !bytes.Equal(got, want) {
			t.Errorf("%s: its bytes changed once the stacks were written", w.Name())
		}
	}
	if size, used, misses := b.RegionStats(); size != c.bytes || used != c.bytes || misses != 0 || b.UsedBytes() != c.bytes {
		t.Errorf("region %d bytes, %d carved, %d misses, backend used %d: want all %d and no miss", size, used, misses, b.UsedBytes(), c.bytes)
	}
	// Full: the next weight is an allocation of its own.
	extra := c.weights[1]
	w, err := b.Place(extra)
	if err != nil {
		t.Fatal(err)
	}
	if b.inRegion(w.(*Weight).p, 1) || b.UsedBytes() != c.bytes+PlaceBytes(extra) {
		t.Errorf("a weight past the region: in it %v, used %d bytes, want %d", b.inRegion(w.(*Weight).p, 1), b.UsedBytes(), c.bytes+PlaceBytes(extra))
	}
	if _, _, misses := b.RegionStats(); misses != 1 {
		t.Errorf("%d misses counted, want 1", misses)
	}
	if err := b.ReserveRegion(1 << 20); err == nil {
		t.Error("a second region was reserved")
	}

	small, err := New(Options{BudgetBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if err := small.ReserveRegion(65 << 20); err == nil || !strings.Contains(err.Error(), "--vram-budget-mib") {
		t.Errorf("a region past the budget: %v, want the budget's error", err)
	}
}

// TestRegionSavesGranularity measures what the driver takes (cuMemGetInfo) for stacks of
// just over 2 MiB: one allocation each (the driver rounds each up to its granularity,
// which the plan does not count) against one region for all of them, which must take no
// more than their sum and one granule.
func TestRegionSavesGranularity(t *testing.T) {
	const stacks, granule = 8, 2 << 20
	spec := compute.WeightSpec{Name: "granularity stack", Type: quant.Q8_0, Rows: 64, Cols: 1024}
	_, per, err := slotSpec(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	slots := granule/per + 1 // just over one granule
	sum := int64(stacks) * compute.SlotAligned(int64(per*slots))
	taken := func(region bool) int64 {
		b, err := New(Options{})
		if errors.Is(err, ErrNoGPU) {
			t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		free := func() int64 {
			if err := b.ctx.Synchronize(); err != nil {
				t.Fatal(err)
			}
			f, _, err := b.ctx.MemInfo()
			if err != nil {
				t.Fatal(err)
			}
			return int64(f)
		}
		before := free()
		if region {
			if err := b.ReserveRegion(sum); err != nil {
				t.Fatal(err)
			}
		}
		for range stacks {
			if _, err := b.NewSlots(spec, slots); err != nil {
				t.Fatal(err)
			}
		}
		return before - free()
	}
	apart, together := taken(false), taken(true)
	t.Logf("%d stacks of %d bytes (%d in all): %d bytes taken one by one (%.2f MiB each), %d in one region",
		stacks, per*slots, sum, apart, float64(apart)/stacks/(1<<20), together)
	if together > sum+granule {
		t.Errorf("the region took %d bytes for %d, more than one %d-byte granule over", together, sum, granule)
	}
	if apart <= together {
		t.Logf("the driver did not round the stacks one by one up (%d bytes against %d): the region saves nothing on this driver", apart, together)
	}
}

// TestKVInOneAllocation: a KV cache's layers (float16, and int8 with scales) are carved
// from one allocation of the sum of their parts, each rounded up to SlotAlign, without
// overlapping.
func TestKVInOneAllocation(t *testing.T) {
	for _, typ := range []string{"f16", "int8"} {
		b := newForTest(t)
		spec := compute.KVSpec{Layers: 5, KVHeads: 2, HeadDim: 64, Positions: 37, Type: typ, Keep: []int{0, 16, 0, 16, 0}}
		before, allocs := b.UsedBytes(), len(b.allocs)
		kv, err := b.NewKV(spec)
		if err != nil {
			t.Fatal(err)
		}
		c := kv.(*KV)
		var want int64
		var ptrs []cuda.DevicePtr
		for l := range spec.Layers {
			rows := spec.Positions
			if spec.Keep[l] > 0 {
				rows = spec.Keep[l]
			}
			row := spec.KVHeads * spec.HeadDim
			parts := []int64{int64(rows * row * 2), int64(rows * row * 2)}
			ptrs = append(ptrs, c.k[l], c.v[l])
			if typ == "int8" {
				sc := int64(rows * 4 * (row / cuda.Int8KVBlock(spec.HeadDim)))
				parts = []int64{int64(rows * row), sc, int64(rows * row), sc}
				ptrs = append(ptrs[:len(ptrs)-2], c.k[l], c.ks[l], c.v[l], c.vs[l])
			}
			for _, n := range parts {
				want += compute.SlotAligned(n)
			}
		}
		if got := b.UsedBytes() - before; got != want || len(b.allocs) != allocs+1 {
			t.Errorf("%s: %d bytes in %d allocations, want %d in one", typ, got, len(b.allocs)-allocs, want)
		}
		for i := 1; i < len(ptrs); i++ {
			if ptrs[i] <= ptrs[i-1] || (ptrs[i]-ptrs[0])%compute.SlotAlign != 0 || int64(ptrs[i]-ptrs[0]) >= want {
				t.Errorf("%s: part %d at %#x after %#x: not the next aligned piece inside the cache", typ, i, uint64(ptrs[i]), uint64(ptrs[i-1]))
			}
		}
	}
}
