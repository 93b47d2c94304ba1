package gpu

import "strata/cuda"

// AutoDevice as Options.Device makes New choose the device with the most free memory.
const AutoDevice = -1

// freeVRAM reports each of n devices' free memory, by ordinal, retaining and releasing each
// one's primary context to ask; a device that does not answer reports 0.
func freeVRAM(drv *cuda.Driver, n int) []int64 {
	free := make([]int64, n)
	for i := range n {
		ctx, err := drv.NewContext(i)
		if err != nil {
			continue
		}
		if f, _, err := ctx.MemInfo(); err == nil {
			free[i] = int64(f)
		}
		_ = ctx.Close()
	}
	return free
}

// MostFree is the index of the largest value (the first of equals), -1 for none.
func MostFree(free []int64) int {
	best := -1
	for i, f := range free {
		if best < 0 || f > free[best] {
			best = i
		}
	}
	return best
}

// DevicesFree reports every device's free memory by ordinal (0 for one that does not
// answer), through the backend's driver.
func (b *Backend) DevicesFree() []int64 {
	n, err := b.drv.DeviceCount()
	if err != nil {
		return nil
	}
	free := freeVRAM(b.drv, n)
	if f := b.FreeBytes(); b.Ordinal() < n && f > 0 {
		free[b.Ordinal()] = f
	}
	return free
}
