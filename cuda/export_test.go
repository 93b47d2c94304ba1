package cuda

// SetRowsPerBlock fixes the 8-bit matvec kernels' rows per block (0: chosen per shape), so
// the tests check every variant and the benchmarks compare them.
func (k *Kernels) SetRowsPerBlock(n int) { k.rowsPerBlock = n }
