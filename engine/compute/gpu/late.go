package gpu

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
)

// lateArea is where the host hands the device rows it fills after the add of them is
// queued (LateRows, AddLate): a word the stream waits on, then two areas of rows used in
// turn, all in one page-locked, mapped buffer. Tiered decode queues a layer's "add the
// CPU's misses" and the next layer's attention while the host still computes those misses.
type lateArea struct {
	hb   *cuda.HostBuffer
	flag *uint32 // hb's first word: the last ticket the host has made ready
	n    int     // floats an area holds
	seq  uint32  // the last ticket handed out
	// read marks an area an AddLate reads, by work that may still be held for a graph: the
	// area is not handed out again before the stream has been waited for.
	read [2]bool
}

// lateTicket is a LateRows' handle: its lateArea, sequence number and area.
type lateTicket struct {
	from *lateArea
	seq  uint32
	area int
}

// lateHeader keeps the flag on a cache line of its own.
const lateHeader = 64

// LateRows hands out n page-locked floats for an AddLate queued before the host fills
// them; the host calls Ready once they hold their values. Ready must be called even when
// AddLate fails, and before the next LateRows: a stream left waiting for it hangs every
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
	if a.read[t.area] {
		// The add two tickets back, with no Read since that waited for the stream (a
		// decode step reads every layer's routes, so this is rare). Its Ready came before
		// this call, so the wait ends.
		if err := b.Synchronize(); err != nil {
			return nil, fmt.Errorf("gpu: %s: late rows: %w", b.info.Name, err)
		}
		a.read = [2]bool{}
	}
	flag, seq := a.flag, t.seq
	return &compute.LateRows{
		Rows:  floatsOf(a.bytes(t.area))[:n],
		Ready: func() { atomic.StoreUint32(flag, seq) },
		Dev:   t,
	}, nil
}

// AddLate queues dst += r's rows, to run once the host has made them ready: the stream
// waits for the rows' ticket, then the add reads them where they lie (page-locked and
// mapped) instead of a copy bringing them into VRAM first, one op less between the misses
// and the next layer. The add is held with the work queued after it, for a graph. The host
// does not wait.
func (b *Backend) AddLate(dst compute.Buf, r *compute.LateRows) error {
	t, ok := r.Dev.(lateTicket)
	a := b.late
	if !ok || a == nil || t.from != a || t.seq != a.seq {
		return fmt.Errorf("gpu: %s: add late: rows not from this device's last LateRows", b.info.Name)
	}
	d, ok := dst.(*buf)
	if !ok || len(r.Rows) > d.n {
		return fmt.Errorf("gpu: %s: add late: %d floats into a buffer of %d", b.info.Name, len(r.Rows), dst.Len())
	}
	b.q8.drop()
	b.step.brk()
	if err := b.s.WaitValue(a.hb.Dev, t.seq); err != nil {
		return fmt.Errorf("gpu: %s: add late: %w", b.info.Name, err)
	}
	rows, n := a.hb.Dev+cuda.DevicePtr(lateHeader+t.area*4*a.n), len(r.Rows)
	b.do(func() error { return b.k.Add(b.s, d.p, rows, d.p, n) }, opAdd, u(d.p), u(rows), uint64(n))
	a.read[t.area] = true
	return nil
}

// synced notes that the stream has been waited for: no add reads the areas any more.
func (a *lateArea) synced() {
	if a != nil {
		a.read = [2]bool{}
	}
}

// lateAreaFor returns the area, made (or remade larger) to hold n floats an area.
func (b *Backend) lateAreaFor(n int) (*lateArea, error) {
	if a := b.late; a != nil && a.n >= n {
		return a, nil
	}
	var seq uint32
	if old := b.late; old != nil {
		// Every add out of the old areas was made ready before this call.
		if err := b.Synchronize(); err != nil {
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
	b.late = a
	return a, nil
}

// bytes is area i.
func (a *lateArea) bytes(i int) []byte {
	lo := lateHeader + i*4*a.n
	return a.hb.Bytes[lo : lo+4*a.n]
}

// free releases the buffer; the stream must be past every add out of it.
func (a *lateArea) free() error {
	if a == nil {
		return nil
	}
	return a.hb.Free()
}
