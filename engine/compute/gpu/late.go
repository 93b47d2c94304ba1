package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
)

// lateArea is where the host hands the device rows it fills after the copy of them is
// queued (LateRows, WriteLate): a word the stream waits on, then two areas of rows used in
// turn, all in one page-locked buffer. Tiered decode queues a layer's "add the CPU's
// misses" and the next layer's attention while the host still computes those misses.
type lateArea struct {
	hb   *cuda.HostBuffer
	flag *uint32 // hb's first word: the last ticket the host has made ready
	n    int     // floats an area holds
	seq  uint32  // the last ticket handed out
	// done marks the end of the copy out of each area, queued: the area is not handed out
	// again before it.
	done   [2]*cuda.Event
	queued [2]bool
}

// lateTicket is a LateRows' handle: its lateArea, sequence number and area.
type lateTicket struct {
	from *lateArea
	seq  uint32
	area int
}

// lateHeader keeps the flag on a cache line of its own.
const lateHeader = 64

// LateRows hands out n page-locked floats for a WriteLate queued before the host fills
// them; the host calls Ready once they hold their values. Ready must be called even when
// WriteLate fails, and before the next LateRows: a stream left waiting for it hangs every
// later Synchronize. Areas are used in turn, so rows handed out are safe to fill until the
// LateRows after next.
func (b *Backend) LateRows(n int) (*compute.LateRows, error) {
	if !b.s.CanWaitValue() {
		return nil, fmt.Errorf("gpu: %s: the driver cannot make a stream wait for the host (no cuStreamWaitValue32_v2)", b.info.Name)
	}
	if n <= 0 {
		return nil, fmt.Errorf("gpu: late rows: %d floats", n)
	}
	a, err := b.lateAreaFor(n)
	if err != nil {
		return nil, fmt.Errorf("gpu: %s: late rows: %w", b.info.Name, err)
	}
	a.seq++
	t := lateTicket{from: a, seq: a.seq, area: int(a.seq & 1)}
	if a.queued[t.area] {
		// The copy two tickets back; its Ready came before this call, so it ends.
		if err := a.done[t.area].Synchronize(); err != nil {
			return nil, fmt.Errorf("gpu: %s: late rows: %w", b.info.Name, err)
		}
		a.queued[t.area] = false
	}
	flag, seq := a.flag, t.seq
	return &compute.LateRows{
		Rows:  floatsOf(a.bytes(t.area))[:n],
		Ready: func() { atomic.StoreUint32(flag, seq) },
		Dev:   t,
	}, nil
}

// WriteLate queues a copy of r's rows into dst that waits until r is made ready. The host
// does not wait.
func (b *Backend) WriteLate(dst compute.Buf, r *compute.LateRows) error {
	t, ok := r.Dev.(lateTicket)
	a := b.late
	if !ok || a == nil || t.from != a || t.seq != a.seq {
		return fmt.Errorf("gpu: %s: write late: rows not from this device's last LateRows", b.info.Name)
	}
	d, ok := dst.(*buf)
	if !ok || len(r.Rows) > d.n {
		return fmt.Errorf("gpu: %s: write late: %d floats into a buffer of %d", b.info.Name, len(r.Rows), dst.Len())
	}
	n := 4 * len(r.Rows)
	b.q8.drop()
	b.step.brk()
	if err := b.s.WaitValue(a.hb.Dev, t.seq); err != nil {
		return fmt.Errorf("gpu: %s: write late: %w", b.info.Name, err)
	}
	src := a.bytes(t.area)
	if err := b.s.CopyToDevice(d.p, unsafe.Pointer(&src[0]), n); err != nil {
		return fmt.Errorf("gpu: %s: write late: %w", b.info.Name, err)
	}
	if err := a.done[t.area].Record(b.s); err != nil {
		// Without its mark the area cannot be handed out safely again: wait for the copy
		// (after Ready) at the next LateRows instead.
		return errors.Join(fmt.Errorf("gpu: %s: write late: %w", b.info.Name, err), b.s.Synchronize())
	}
	a.queued[t.area] = true
	return nil
}

// lateAreaFor returns the area, made (or remade larger) to hold n floats an area.
func (b *Backend) lateAreaFor(n int) (*lateArea, error) {
	if a := b.late; a != nil && a.n >= n {
		return a, nil
	}
	var seq uint32
	if old := b.late; old != nil {
		// Every copy out of the old areas was made ready before this call.
		if err := b.s.Synchronize(); err != nil {
			return nil, err
		}
		seq = old.seq
		b.late = nil
		if err := old.free(); err != nil {
			return nil, err
		}
	}
	hb, err := b.ctx.HostAlloc(lateHeader + 2*4*n)
	if err != nil {
		return nil, err
	}
	// The tickets go on from the old area's, and its flag starts at the last of them: the
	// stream's comparison is cyclic, so a flag far behind a ticket could read as ahead.
	a := &lateArea{hb: hb, flag: (*uint32)(unsafe.Pointer(&hb.Bytes[0])), n: n, seq: seq}
	atomic.StoreUint32(a.flag, seq)
	for i := range a.done {
		if a.done[i], err = b.ctx.NewEvent(false); err != nil {
			return nil, errors.Join(err, a.free())
		}
	}
	b.late = a
	return a, nil
}

// bytes is area i.
func (a *lateArea) bytes(i int) []byte {
	lo := lateHeader + i*4*a.n
	return a.hb.Bytes[lo : lo+4*a.n]
}

// free releases the buffer and events; the stream must be past every copy out of them.
func (a *lateArea) free() error {
	if a == nil {
		return nil
	}
	errs := []error{a.hb.Free()}
	for _, e := range a.done {
		errs = append(errs, e.Destroy())
	}
	return errors.Join(errs...)
}
