package cuda

import "slices"

// SetRowsPerBlock fixes the 8-bit matvec kernels' rows per block (0: chosen per shape), so
// the tests check every variant and the benchmarks compare them.
func (k *Kernels) SetRowsPerBlock(n int) { k.rowsPerBlock = n }

// LaunchesEarly says whether kernel name is launched with programmatic stream serialization
// on this device.
func (k *Kernels) LaunchesEarly(name string) bool {
	f := k.fns[name]
	return f != nil && f.early
}

// EarlyKernelsUnknown lists earlyKernels entries that name no loaded kernel.
func EarlyKernelsUnknown() []string {
	var out []string
	names := kernelNames()
	for _, e := range earlyKernels {
		if !slices.ContainsFunc(names, func(n string) bool { return earlyEntryNames(e, n) }) {
			out = append(out, e)
		}
	}
	return out
}
