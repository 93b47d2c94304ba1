package gpu

import (
	"fmt"

	"strata/cuda"
	"strata/engine/compute"
)

// The driver rounds each large cuMemAlloc up to its granularity (2 MiB): a weight of 4.5
// MiB takes 6, a stack of 60 q30b experts (50.6 MiB) takes 52. Allocated one by one, q30b's
// weights and slot stacks at --vram-budget-mib 8913 lost 261 MiB that way, which no plan
// counts. A region is one allocation for all of them, sized up front by whoever knows the
// list (the engine: the model's weights and the expert cache's stacks), which Place and
// NewSlots carve in order at compute.SlotAlign steps; what does not fit gets an allocation
// of its own, as before.
type region struct {
	p       cuda.DevicePtr
	n, used int64
	misses  int // allocations that did not fit (for tests and the log)
}

// carve takes n bytes, rounded up to compute.SlotAlign, from the region.
func (r *region) carve(n int64) (cuda.DevicePtr, bool) {
	n = compute.SlotAligned(max(n, 1))
	if r.p == 0 || r.used+n > r.n {
		if r.p != 0 {
			r.misses++
		}
		return 0, false
	}
	p := r.p + cuda.DevicePtr(r.used)
	r.used += n
	return p, true
}

// ReserveRegion allocates n bytes in one piece for the weights (Place) and slot stacks
// (NewSlots) that come next. The budget counts the region as a whole when it is reserved
// and the carves not again. A second reservation is refused.
func (b *Backend) ReserveRegion(n int64) error {
	if b.region.p != 0 {
		return fmt.Errorf("gpu: %s: a region is reserved already (%d MiB)", b.info.Name, b.region.n>>20)
	}
	if n <= 0 {
		return fmt.Errorf("gpu: %s: a region of %d bytes", b.info.Name, n)
	}
	p, err := b.alloc(int(n), fmt.Sprintf("region for weights and slot stacks (%d MiB)", n>>20))
	if err != nil {
		return err
	}
	b.region = region{p: p, n: n}
	return nil
}

// RegionStats reports the region's size, the bytes carved from it and how many
// allocations did not fit it (0, 0, 0 without one).
func (b *Backend) RegionStats() (size, used int64, misses int) {
	return b.region.n, b.region.used, b.region.misses
}

// carveOrAlloc takes n bytes from the region, or allocates them on their own.
func (b *Backend) carveOrAlloc(n int, what string) (cuda.DevicePtr, error) {
	if p, ok := b.region.carve(int64(n)); ok {
		return p, nil
	}
	return b.alloc(n, what)
}

// inRegion says whether [p, p+n) lies inside the region (for tests).
func (b *Backend) inRegion(p cuda.DevicePtr, n int64) bool {
	r := b.region
	return r.p != 0 && p >= r.p && int64(p-r.p)+n <= r.n
}
