package gpu

import (
	"unsafe"

	"strata/cuda"
)

// Page-locked areas for the host's small transfers mid-step. A copy from or to pageable
// memory is synchronous and staged by the driver; into page-locked memory it is one
// asynchronous copy, so a Read can queue its values and the pending routes and wait once,
// and a Write's upload need not wait at all. Tiered decode reads the routes and a layer's
// input and writes the CPU's results back at every layer.

// maxHostIO bounds each area; larger transfers take the pageable path.
const maxHostIO = 4 << 20

// hostIO is one page-locked area, grown on demand up to maxHostIO.
type hostIO struct {
	hb   *cuda.HostBuffer
	used int // bytes handed out since the last reset
}

// take returns n bytes of the area (16-byte aligned), or nil when they do not fit under
// maxHostIO or the allocation fails. Growing drops what was handed out: callers take
// space only when every copy through the area has finished (after a Synchronize) or
// reset right before.
func (h *hostIO) take(ctx *cuda.Context, n int) []byte {
	need := h.used + (n+15)&^15
	if need > maxHostIO {
		return nil
	}
	if h.hb == nil || need > len(h.hb.Bytes) {
		if h.used > 0 {
			return nil // earlier copies may still read the old area
		}
		size := max(64<<10, 2*need)
		size = min(size, maxHostIO)
		hb, err := ctx.HostAlloc(size)
		if err != nil {
			return nil
		}
		_ = h.hb.Free()
		h.hb = hb
	}
	b := h.hb.Bytes[h.used : h.used+n]
	h.used = need
	return b
}

func (h *hostIO) reset()      { h.used = 0 }
func (h *hostIO) free() error { return h.hb.Free() }

// floatsOf views b as float32s.
func floatsOf(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }

// uint32sOf views b as uint32s.
func uint32sOf(b []byte) []uint32 { return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4) }
