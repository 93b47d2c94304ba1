package gpu

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
)

// Slot stacks hold the experts of an expert cache: a Weight of `slots` experts whose
// contents the expert code writes (WriteSlots) and rewrites (adaptive swaps). MoE runs on
// them like on any stacked tensor, with slot numbers as expert ids.

// stagingBufBytes and stagingBufs size the pinned buffers that uploads pass through by
// default (Options may shrink them): several readers copy from the model file into them
// while earlier ones are in flight.
const (
	stagingBufBytes = 8 << 20
	stagingBufs     = 6
)

// slotSpec checks that the kernels read spec's type without conversion (a cache slot must
// hold the file's bytes as they are) and returns the bytes of one expert.
func slotSpec(spec compute.WeightSpec, slots int) (int, int, error) {
	if slots <= 0 {
		return 0, 0, fmt.Errorf("gpu: %s: %d slots", spec.Name, slots)
	}
	if !cuda.QuantType(spec.Type).Supported() {
		return 0, 0, fmt.Errorf("gpu: %s: the GPU kernels do not read %s, so its experts cannot be cached in VRAM", spec.Name, spec.Type)
	}
	rb, err := quant.RowBytes(spec.Type, spec.Cols)
	if err != nil {
		return 0, 0, fmt.Errorf("gpu: %s: %w", spec.Name, err)
	}
	return rb, rb * spec.Rows, nil
}

// NewSlots allocates slots experts of spec's type and shape in VRAM (spec.Data is not read).
func (b *Backend) NewSlots(spec compute.WeightSpec, slots int) (compute.Weight, error) {
	rb, per, err := slotSpec(spec, slots)
	if err != nil {
		return nil, err
	}
	b.step.brk()
	p, err := b.carveOrAlloc(per*slots, fmt.Sprintf("expert cache %s (%d slots)", spec.Name, slots))
	if err != nil {
		return nil, err
	}
	return &Weight{name: spec.Name, typ: spec.Type, rows: spec.Rows, cols: spec.Cols, exps: slots, rowBytes: rb, stride: per, p: p}, nil
}

// RegisterHost page-locks host memory the caller owns (anonymous memory, such as the RAM
// arena: the driver refuses file-backed pages) and maps it into the device, so HostStack
// can view parts of it. The registration ends at Close.
func (b *Backend) RegisterHost(mem []byte) error {
	hb, err := b.ctx.HostRegister(mem)
	if err != nil {
		return fmt.Errorf("gpu: register %d MiB of host memory: %w", len(mem)>>20, err)
	}
	b.hostBufs = append(b.hostBufs, hb)
	return nil
}

// HostStack views spec.Experts experts in registered host memory (spec.Data, expert after
// expert spec.ExpertStride bytes apart) as a stack the kernels read over PCIe.
func (b *Backend) HostStack(spec compute.WeightSpec) (compute.Weight, error) {
	rb, _, err := slotSpec(spec, max(spec.Experts, 1))
	if err != nil {
		return nil, err
	}
	_, stride, err := spec.CheckSize(rb)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	dev, ok := b.registeredView(spec.Data)
	if !ok {
		return nil, fmt.Errorf("gpu: %s: host memory at %p (%d bytes) is not registered", spec.Name, unsafe.SliceData(spec.Data), len(spec.Data))
	}
	return &Weight{name: spec.Name, typ: spec.Type, rows: spec.Rows, cols: spec.Cols, exps: max(spec.Experts, 1),
		rowBytes: rb, stride: stride, p: dev, host: spec.Data}, nil
}

// registeredView is where the device sees p when p lies entirely inside host memory from
// RegisterHost; false when it does not (plain Go memory, the model file's mapping).
func (b *Backend) registeredView(p []byte) (cuda.DevicePtr, bool) {
	if len(p) == 0 {
		return 0, false
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for _, hb := range b.hostBufs {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(hb.Bytes)))
		if at >= lo && at+uintptr(len(p)) <= lo+uintptr(len(hb.Bytes)) {
			return hb.Dev.Add(int(at - lo)), true
		}
	}
	return 0, false
}

// WriteSlots copies expert matrices into slots of a stack from NewSlots or NewHostSlots.
// Kernels queued afterwards see the new contents, and the sources may be overwritten once
// it returns (callers rewrite a pinned slot right after its expert moved to VRAM). Into
// VRAM, a source inside registered host memory (the pinned arena) is copied by one DMA
// straight from it; the others pass through pinned buffers filled by several goroutines
// (the reads from the model file are the slow part), queued after the direct copies so
// that their memcpys overlap them.
func (b *Backend) WriteSlots(wt compute.Weight, writes []compute.SlotWrite) error {
	w, err := slotWrites(wt, writes)
	if err != nil {
		return err
	}
	if w.host != nil {
		b.step.brk()
		// The GPU may be reading the old contents, and the copy stream may be reading them
		// as sources of WriteSlotsAsync: wait for both before overwriting them.
		if err := b.s.Synchronize(); err != nil {
			return fmt.Errorf("gpu: %s: %w", w.name, err)
		}
		if err := b.lap.sync(); err != nil {
			return fmt.Errorf("gpu: %s: %w", w.name, err)
		}
		parallelEach(len(writes), func(i int) {
			copy(w.host[writes[i].Slot*w.stride:], writes[i].Data)
		})
		return nil
	}
	var direct, staged []compute.SlotWrite
	for _, s := range writes {
		if _, ok := b.registeredView(s.Data); ok {
			direct = append(direct, s)
		} else {
			staged = append(staged, s)
		}
	}
	var st *stager
	if len(staged) > 0 {
		if st, err = b.stagerFor(); err != nil {
			return err
		}
	}
	b.step.brk()
	b.q8.drop()
	// Asynchronous copies not yet waited for may write the same slots: these come after.
	if err := b.afterCopies(); err != nil {
		return err
	}
	queued, err := b.copyDirect(w, direct)
	if err == nil && st != nil {
		err = st.upload(w.name, w.p, w.stride, staged)
	}
	if queued {
		// Even when an upload failed, the DMA may still be reading the sources.
		err = errors.Join(err, b.waitDirect(w.name))
	}
	return err
}

// registeredWrites checks writes as slotWrites does, and that they go into VRAM slots from
// sources in registered host memory: WriteSlotsAsync's copies run without the host
// waiting, and read the sources by DMA after the call returns.
func (b *Backend) registeredWrites(wt compute.Weight, writes []compute.SlotWrite) (*Weight, error) {
	w, err := slotWrites(wt, writes)
	if err != nil {
		return nil, err
	}
	if w.host != nil {
		return nil, fmt.Errorf("gpu: %s: copies by DMA go into VRAM slots, not a host stack", w.name)
	}
	for _, s := range writes {
		if _, ok := b.registeredView(s.Data); !ok {
			return nil, fmt.Errorf("gpu: %s: the source of slot %d (%p) is not in registered host memory", w.name, s.Slot, unsafe.SliceData(s.Data))
		}
	}
	return w, nil
}

// slotWrites checks that writes fit the slots of wt and returns it as a GPU weight.
func slotWrites(wt compute.Weight, writes []compute.SlotWrite) (*Weight, error) {
	w, ok := wt.(*Weight)
	if !ok {
		return nil, fmt.Errorf("gpu: write slots: %T is not a GPU weight", wt)
	}
	per := w.expertBytes()
	for _, s := range writes {
		if s.Slot < 0 || s.Slot >= w.exps || len(s.Data) != per {
			return nil, fmt.Errorf("gpu: %s: write of %d bytes to slot %d of %d (%d bytes each)", w.name, len(s.Data), s.Slot, w.exps, per)
		}
	}
	return w, nil
}

// copyDirect queues writes whose sources lie in registered host memory and records
// b.directDone after them; true when it did (waitDirect then waits for them).
func (b *Backend) copyDirect(w *Weight, writes []compute.SlotWrite) (bool, error) {
	if len(writes) == 0 {
		return false, nil
	}
	if b.directDone == nil {
		ev, err := b.ctx.NewEvent(false)
		if err != nil {
			return false, fmt.Errorf("gpu: %s: direct copies' event: %w", w.name, err)
		}
		b.directDone = ev
	}
	err := b.queueDMA(b.s, w, writes)
	if err == nil {
		err = b.directDone.Record(b.s)
	}
	if err != nil {
		// Copies queued before the failure may still read their sources.
		return false, errors.Join(fmt.Errorf("gpu: %s: direct copies: %w", w.name, err), b.s.Synchronize())
	}
	return true, nil
}

// queueDMA queues on st one host-to-device copy a write into w's slots. The sources must
// be page-locked (registered) host memory: the copy engine then reads them by DMA after the
// call returns, and no CPU copies a byte.
func (b *Backend) queueDMA(st *cuda.Stream, w *Weight, writes []compute.SlotWrite) error {
	for _, s := range writes {
		if err := st.CopyToDevice(w.p.Add(s.Slot*w.stride), unsafe.Pointer(unsafe.SliceData(s.Data)), len(s.Data)); err != nil {
			return fmt.Errorf("slot %d: %w", s.Slot, err)
		}
	}
	return nil
}

// waitDirect waits for b.directDone, recorded after the direct copies (and so after the
// work queued before them), so their sources may be overwritten; the staged copies queued
// after them need not be waited for.
func (b *Backend) waitDirect(name string) error {
	if err := b.directDone.Synchronize(); err != nil {
		return fmt.Errorf("gpu: %s: direct copies: %w", name, err)
	}
	return nil
}

// parallelEach runs fn(0..n-1) on a few goroutines.
func parallelEach(n int, fn func(i int)) {
	workers := min(n, 4)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += workers {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// HostRoutes makes r's IDs and Weights valid on the host now: from the route mail when r
// was posted there, else by one small download.
func (b *Backend) HostRoutes(r *compute.Routes) {
	if b.mailed(r, 0, 0) && b.readMail(nil) {
		return
	}
	if _, pending := r.Dev.(*devRoutes); pending {
		b.step.brk()
		b.flushRoutes()
	}
}

// stager uploads through a ring of pinned buffers, each reused once its copy is done.
type stager struct {
	s        *cuda.Stream
	bufs     []stagingBuf
	bufBytes int
	free     chan int
	mu       sync.Mutex // one goroutine queues copies at a time
}

type stagingBuf struct {
	hb   *cuda.HostBuffer
	done *cuda.Event
	used bool
}

// SetStaging shapes the ring of pinned staging buffers (bufs of bufBytes each) before the
// first upload allocates it: the engine shrinks it to fit a pinned-memory budget (WSL2).
// Values below 1 keep the defaults; once the ring exists it is not resized.
func (b *Backend) SetStaging(bufs, bufBytes int) {
	if b.stage != nil {
		return
	}
	if bufs > 0 {
		b.stagingBufs = bufs
	}
	if bufBytes > 0 {
		b.stagingBufBytes = bufBytes
	}
}

func (b *Backend) stagerFor() (*stager, error) {
	if b.stage != nil {
		return b.stage, nil
	}
	st := &stager{s: b.s, free: make(chan int, b.stagingBufs), bufBytes: b.stagingBufBytes}
	for i := range b.stagingBufs {
		hb, err := b.ctx.HostAlloc(b.stagingBufBytes)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("gpu: pinned staging buffers: %w", err)
		}
		ev, err := b.ctx.NewEvent(false)
		if err != nil {
			_ = hb.Free()
			st.close()
			return nil, fmt.Errorf("gpu: staging events: %w", err)
		}
		st.bufs = append(st.bufs, stagingBuf{hb: hb, done: ev})
		st.free <- i
	}
	b.stage = st
	return st, nil
}

// upload copies every write into dst+slot*per, in pieces of at most one staging buffer.
func (st *stager) upload(name string, dst cuda.DevicePtr, per int, writes []compute.SlotWrite) error {
	type piece struct {
		dst cuda.DevicePtr
		src []byte
	}
	var pieces []piece
	for _, w := range writes {
		for off := 0; off < len(w.Data); off += st.bufBytes {
			end := min(off+st.bufBytes, len(w.Data))
			pieces = append(pieces, piece{dst.Add(w.Slot*per + off), w.Data[off:end]})
		}
	}
	var (
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if first == nil {
			first = fmt.Errorf("gpu: upload %s: %w", name, err)
		}
	}
	parallelEach(len(pieces), func(i int) {
		p := pieces[i]
		k := <-st.free
		buf := &st.bufs[k]
		defer func() { st.free <- k }()
		if buf.used {
			if err := buf.done.Synchronize(); err != nil {
				fail(err)
				return
			}
		}
		copy(buf.hb.Bytes, p.src) // the page faults of a cold file happen here, in parallel
		st.mu.Lock()
		defer st.mu.Unlock()
		if err := st.s.CopyToDevice(p.dst, unsafe.Pointer(&buf.hb.Bytes[0]), len(p.src)); err != nil {
			fail(err)
			return
		}
		if err := buf.done.Record(st.s); err != nil {
			fail(err)
			return
		}
		buf.used = true
	})
	return first
}

func (st *stager) close() error {
	var first error
	for _, b := range st.bufs {
		if b.done != nil {
			if err := b.done.Destroy(); err != nil && first == nil {
				first = err
			}
		}
		if err := b.hb.Free(); err != nil && first == nil {
			first = err
		}
	}
	st.bufs = nil
	return first
}

// ReadSlot copies one expert's matrix back from a stack (for --verify).
func (b *Backend) ReadSlot(wt compute.Weight, slot int) ([]byte, error) {
	w, ok := wt.(*Weight)
	if !ok || slot < 0 || slot >= w.exps {
		return nil, fmt.Errorf("gpu: read slot %d of %v", slot, wt)
	}
	b.step.brk()
	if err := b.afterCopies(); err != nil {
		return nil, err
	}
	out := make([]byte, w.expertBytes())
	if err := cuda.Download(b.s, out, w.p.Add(slot*w.stride)); err != nil {
		return nil, fmt.Errorf("gpu: %s: read slot %d: %w", w.name, slot, err)
	}
	return out, nil
}

// Synchronize launches the ops held for a graph and waits until the device has run
// everything queued so far, the copies of WriteSlotsAsync too.
func (b *Backend) Synchronize() error {
	b.step.brk()
	if err := b.s.Synchronize(); err != nil {
		return fmt.Errorf("gpu: %s: %w", b.info.Name, err)
	}
	b.mail.idle()
	if err := b.lap.sync(); err != nil {
		return fmt.Errorf("gpu: %s: %w", b.info.Name, err)
	}
	return nil
}

// Flush launches the ops held for a graph, so the device works while the host computes.
// It queues nothing new, so a route posted to the mail can still be read from it.
func (b *Backend) Flush() { b.step.flush() }
