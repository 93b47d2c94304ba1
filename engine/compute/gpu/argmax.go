package gpu

import (
	"fmt"

	"strata/cuda"
	"strata/engine/compute"
)

// opArgmax is ReadArgmax's op code (apart from the list in gpu.go).
const opArgmax uint64 = 2000

// ReadArgmax is compute.ArgmaxReader: the argmax kernel joins the step (a graph node like
// the rest), and the step ends with a download of its one int32 instead of the row.
func (b *Backend) ReadArgmax(src compute.Buf, n int) int {
	if n <= 0 {
		b.err.Set(fmt.Errorf("gpu: argmax of %d values", n))
		return 0
	}
	out := b.scratchBuf("argmax", 4)
	if out == 0 {
		return 0 // the allocation error is recorded
	}
	x := dev(src)
	b.do(func() error { return b.k.Argmax(b.s, x, n, out) }, opArgmax, u(x), uint64(n), u(out))
	var id [1]int32
	b.finishStep(func() {
		b.err.Set(cuda.Download(b.s, id[:], out))
		b.flushRoutes()
	})
	if id[0] < 0 || int(id[0]) >= n {
		b.err.Set(fmt.Errorf("gpu: argmax of %d values gave %d", n, id[0]))
		return 0
	}
	return int(id[0])
}
