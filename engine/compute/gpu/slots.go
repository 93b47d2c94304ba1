package gpu

import (
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
	p, err := b.alloc(per*slots, fmt.Sprintf("expert cache %s (%d slots)", spec.Name, slots))
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
	p := uintptr(unsafe.Pointer(unsafe.SliceData(spec.Data)))
	for _, hb := range b.hostBufs {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(hb.Bytes)))
		if p >= lo && p+uintptr(len(spec.Data)) <= lo+uintptr(len(hb.Bytes)) {
			return &Weight{name: spec.Name, typ: spec.Type, rows: spec.Rows, cols: spec.Cols, exps: max(spec.Experts, 1),
				rowBytes: rb, stride: stride, p: hb.Dev.Add(int(p - lo)), host: spec.Data}, nil
		}
	}
	return nil, fmt.Errorf("gpu: %s: host memory at %#x is not registered", spec.Name, p)
}

// WriteSlots copies expert matrices into slots of a stack from NewSlots or NewHostSlots.
// Kernels queued afterwards see the new contents. VRAM uploads pass through pinned buffers
// filled by several goroutines (the reads from the model file are the slow part).
func (b *Backend) WriteSlots(wt compute.Weight, writes []compute.SlotWrite) error {
	w, ok := wt.(*Weight)
	if !ok {
		return fmt.Errorf("gpu: write slots: %T is not a GPU weight", wt)
	}
	per := w.expertBytes()
	for _, s := range writes {
		if s.Slot < 0 || s.Slot >= w.exps || len(s.Data) != per {
			return fmt.Errorf("gpu: %s: write of %d bytes to slot %d of %d (%d bytes each)", w.name, len(s.Data), s.Slot, w.exps, per)
		}
	}
	if w.host != nil {
		b.step.brk()
		// The GPU may be reading the old contents: wait before overwriting them.
		if err := b.s.Synchronize(); err != nil {
			return fmt.Errorf("gpu: %s: %w", w.name, err)
		}
		parallelEach(len(writes), func(i int) {
			copy(w.host[writes[i].Slot*w.stride:], writes[i].Data)
		})
		return nil
	}
	st, err := b.stagerFor()
	if err != nil {
		return err
	}
	b.step.brk()
	b.q8.drop()
	return st.upload(w.name, w.p, w.stride, writes)
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

// HostRoutes makes r's IDs and Weights valid on the host now (one small download).
func (b *Backend) HostRoutes(r *compute.Routes) {
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
	out := make([]byte, w.expertBytes())
	if err := cuda.Download(b.s, out, w.p.Add(slot*w.stride)); err != nil {
		return nil, fmt.Errorf("gpu: %s: read slot %d: %w", w.name, slot, err)
	}
	return out, nil
}

// Synchronize launches the ops held for a graph and waits until the device has run
// everything queued so far.
func (b *Backend) Synchronize() error {
	b.step.brk()
	if err := b.s.Synchronize(); err != nil {
		return fmt.Errorf("gpu: %s: %w", b.info.Name, err)
	}
	return nil
}

// Flush launches the ops held for a graph, so the device works while the host computes.
func (b *Backend) Flush() { b.step.brk() }
