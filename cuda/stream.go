package cuda

/*
#include "shim.h"

static CUresult s_stream_create(strata_cu *d, CUcontext c, CUstream *s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamCreate(s, 1); // CU_STREAM_NON_BLOCKING
}
static CUresult s_stream_destroy(strata_cu *d, CUcontext c, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamDestroy(s);
}
static CUresult s_stream_sync(strata_cu *d, CUcontext c, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamSynchronize(s);
}
static CUresult s_stream_wait(strata_cu *d, CUcontext c, CUstream s, CUevent e) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamWaitEvent(s, e, 0);
}
static CUresult s_wait_value(strata_cu *d, CUcontext c, CUstream s, CUdeviceptr addr, uint32_t v) {
	if (!d->cuStreamWaitValue32) return 500; // CUDA_ERROR_NOT_FOUND
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamWaitValue32(s, addr, v, 0); // CU_STREAM_WAIT_VALUE_GEQ
}
static CUresult s_htod(strata_cu *d, CUcontext c, CUdeviceptr dst, uintptr_t src, size_t n, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemcpyHtoDAsync(dst, (const void *)src, n, s);
}
static CUresult s_dtoh(strata_cu *d, CUcontext c, uintptr_t dst, CUdeviceptr src, size_t n, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemcpyDtoHAsync((void *)dst, src, n, s);
}
static CUresult s_dtod(strata_cu *d, CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemcpyDtoDAsync(dst, src, n, s);
}
static CUresult s_memset8(strata_cu *d, CUcontext c, CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemsetD8Async(dst, v, n, s);
}
static CUresult s_memset32(strata_cu *d, CUcontext c, CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemsetD32Async(dst, v, n, s);
}
static CUresult s_event_create(strata_cu *d, CUcontext c, CUevent *e, unsigned flags) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuEventCreate(e, flags);
}
static CUresult s_event_destroy(strata_cu *d, CUcontext c, CUevent e) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuEventDestroy(e);
}
static CUresult s_event_record(strata_cu *d, CUcontext c, CUevent e, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuEventRecord(e, s);
}
static CUresult s_event_sync(strata_cu *d, CUcontext c, CUevent e) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuEventSynchronize(e);
}
static CUresult s_event_elapsed(strata_cu *d, CUcontext c, float *ms, CUevent a, CUevent b) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuEventElapsedTime(ms, a, b);
}
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Stream is an ordered queue of device work.
type Stream struct {
	c *Context
	s C.CUstream
}

// NewStream creates a non-blocking stream.
func (c *Context) NewStream() (*Stream, error) {
	var s C.CUstream
	if err := c.d.check(C.s_stream_create(c.d.api, c.ctx, &s), "cuStreamCreate(device %d)", c.Ordinal); err != nil {
		return nil, err
	}
	return &Stream{c: c, s: s}, nil
}

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.c }

// Destroy releases the stream after its work completes.
func (s *Stream) Destroy() error {
	if s == nil || s.s == nil {
		return nil
	}
	st := s.s
	s.s = nil
	return s.c.d.check(C.s_stream_destroy(s.c.d.api, s.c.ctx, st), "cuStreamDestroy")
}

// Synchronize waits until all work queued on s has finished; kernel faults surface here.
func (s *Stream) Synchronize() error {
	return s.c.d.check(C.s_stream_sync(s.c.d.api, s.c.ctx, s.s), "cuStreamSynchronize")
}

// Wait makes later work on s wait for e.
func (s *Stream) Wait(e *Event) error {
	return s.c.d.check(C.s_stream_wait(s.c.d.api, s.c.ctx, s.s, e.e), "cuStreamWaitEvent")
}

// CanWaitValue says whether the driver has cuStreamWaitValue32_v2 (WaitValue).
func (s *Stream) CanWaitValue() bool { return s.c.d.api.cuStreamWaitValue32 != nil }

// WaitValue makes later work on s wait until the 32-bit word at addr (a device view, such as
// a HostBuffer's Dev) reaches v, compared cyclically: (int32)(word - v) >= 0. Nothing else
// orders the host's write of that word with the stream, so the host must always write it:
// a wait never satisfied hangs every later Synchronize.
func (s *Stream) WaitValue(addr DevicePtr, v uint32) error {
	return s.c.d.check(C.s_wait_value(s.c.d.api, s.c.ctx, s.s, C.CUdeviceptr(addr), C.uint32_t(v)), "cuStreamWaitValue32(%#x, %d)", uint64(addr), v)
}

// CopyToDevice copies n bytes from host memory at src to dst. With pageable memory
// the driver has read src before it returns; with pinned memory (HostBuffer) the copy
// is asynchronous and src must stay untouched until the stream reaches it.
func (s *Stream) CopyToDevice(dst DevicePtr, src unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	return s.c.d.check(C.s_htod(s.c.d.api, s.c.ctx, C.CUdeviceptr(dst), C.uintptr_t(uintptr(src)), C.size_t(n), s.s), "cuMemcpyHtoDAsync(%#x, %d bytes)", uint64(dst), n)
}

// CopyFromDevice copies n bytes from src to host memory at dst. Into pageable memory the
// call returns when the copy is done; into pinned memory it is asynchronous.
func (s *Stream) CopyFromDevice(dst unsafe.Pointer, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return s.c.d.check(C.s_dtoh(s.c.d.api, s.c.ctx, C.uintptr_t(uintptr(dst)), C.CUdeviceptr(src), C.size_t(n), s.s), "cuMemcpyDtoHAsync(%#x, %d bytes)", uint64(src), n)
}

// CopyDevice copies n bytes between device buffers.
func (s *Stream) CopyDevice(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return s.c.d.check(C.s_dtod(s.c.d.api, s.c.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), s.s), "cuMemcpyDtoDAsync(%#x <- %#x, %d bytes)", uint64(dst), uint64(src), n)
}

// Memset sets n bytes at dst to v.
func (s *Stream) Memset(dst DevicePtr, v byte, n int) error {
	if n == 0 {
		return nil
	}
	return s.c.d.check(C.s_memset8(s.c.d.api, s.c.ctx, C.CUdeviceptr(dst), C.uchar(v), C.size_t(n), s.s), "cuMemsetD8Async(%#x, %d bytes)", uint64(dst), n)
}

// Memset32 sets n 32-bit words at dst to v (dst 4-byte aligned).
func (s *Stream) Memset32(dst DevicePtr, v uint32, n int) error {
	if n == 0 {
		return nil
	}
	return s.c.d.check(C.s_memset32(s.c.d.api, s.c.ctx, C.CUdeviceptr(dst), C.uint(v), C.size_t(n), s.s), "cuMemsetD32Async(%#x, %d words)", uint64(dst), n)
}

// Upload copies a Go slice to the device (the driver has read it when Upload returns).
func Upload[T any](s *Stream, dst DevicePtr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	var z T
	err := s.CopyToDevice(dst, unsafe.Pointer(&src[0]), len(src)*int(unsafe.Sizeof(z)))
	keepAlive(src)
	return err
}

// Download copies device memory into a Go slice and waits for the copy.
func Download[T any](s *Stream, dst []T, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	var z T
	n := len(dst) * int(unsafe.Sizeof(z))
	if err := s.CopyFromDevice(unsafe.Pointer(&dst[0]), src, n); err != nil {
		return err
	}
	err := s.Synchronize()
	keepAlive(dst)
	return err
}

// Event marks a point in a stream, for ordering between streams and for timing.
type Event struct {
	c *Context
	e C.CUevent
}

// NewEvent creates an event; timing events can measure elapsed time.
func (c *Context) NewEvent(timing bool) (*Event, error) {
	flags := C.uint(0x2) // CU_EVENT_DISABLE_TIMING
	if timing {
		flags = 0
	}
	var e C.CUevent
	if err := c.d.check(C.s_event_create(c.d.api, c.ctx, &e, flags), "cuEventCreate(device %d)", c.Ordinal); err != nil {
		return nil, err
	}
	return &Event{c: c, e: e}, nil
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	if e == nil || e.e == nil {
		return nil
	}
	ev := e.e
	e.e = nil
	return e.c.d.check(C.s_event_destroy(e.c.d.api, e.c.ctx, ev), "cuEventDestroy")
}

// Record marks the current end of s.
func (e *Event) Record(s *Stream) error {
	return e.c.d.check(C.s_event_record(e.c.d.api, e.c.ctx, e.e, s.s), "cuEventRecord")
}

// Synchronize waits for the event.
func (e *Event) Synchronize() error {
	return e.c.d.check(C.s_event_sync(e.c.d.api, e.c.ctx, e.e), "cuEventSynchronize")
}

// Since is the device time from start to e (both recorded, e completed).
func (e *Event) Since(start *Event) (time.Duration, error) {
	var ms C.float
	if err := e.c.d.check(C.s_event_elapsed(e.c.d.api, e.c.ctx, &ms, start.e, e.e), "cuEventElapsedTime"); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// String names the stream for logs.
func (s *Stream) String() string { return fmt.Sprintf("stream(device %d)", s.c.Ordinal) }
