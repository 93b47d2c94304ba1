package cuda

/*
#include "shim.h"

static CUresult s_retain(strata_cu *d, CUcontext *c, int ordinal) {
	CUdevice dev;
	CUresult r = d->cuDeviceGet(&dev, ordinal);
	if (r) return r;
	return d->cuDevicePrimaryCtxRetain(c, dev);
}
static CUresult s_release(strata_cu *d, int ordinal) {
	CUdevice dev;
	CUresult r = d->cuDeviceGet(&dev, ordinal);
	if (r) return r;
	return d->cuDevicePrimaryCtxRelease(dev);
}
static CUresult s_create(strata_cu *d, CUcontext *c, int ordinal) {
	if (!d->cuCtxCreate || !d->cuCtxDestroy) return 500; // CUDA_ERROR_NOT_FOUND
	CUdevice dev;
	CUresult r = d->cuDeviceGet(&dev, ordinal);
	if (r) return r;
	return d->cuCtxCreate(c, 0, dev);
}
static CUresult s_destroy(strata_cu *d, CUcontext c) { return d->cuCtxDestroy(c); }
static CUresult s_sync(strata_cu *d, CUcontext c) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuCtxSynchronize();
}
static CUresult s_meminfo(strata_cu *d, CUcontext c, size_t *f, size_t *t) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemGetInfo(f, t);
}
static CUresult s_alloc(strata_cu *d, CUcontext c, CUdeviceptr *p, size_t n) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemAlloc(p, n);
}
static CUresult s_free(strata_cu *d, CUcontext c, CUdeviceptr p) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemFree(p);
}
static CUresult s_hostalloc(strata_cu *d, CUcontext c, void **p, size_t n, unsigned f) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemHostAlloc(p, n, f);
}
static CUresult s_freehost(strata_cu *d, CUcontext c, void *p) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemFreeHost(p);
}
static CUresult s_hostregister(strata_cu *d, CUcontext c, uintptr_t p, size_t n, unsigned f) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemHostRegister((void *)p, n, f);
}
static CUresult s_hostunregister(strata_cu *d, CUcontext c, uintptr_t p) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemHostUnregister((void *)p);
}
static CUresult s_hostdevptr(strata_cu *d, CUcontext c, CUdeviceptr *dp, uintptr_t p) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuMemHostGetDevicePointer(dp, (void *)p, 0);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Context is a context of one device: its primary context (NewContext), or one of its own
// (NewOwnContext). Every call sets it current on the calling OS thread first, so goroutines
// may use it from any thread.
type Context struct {
	d       *Driver
	ctx     C.CUcontext
	own     bool // from cuCtxCreate: destroyed, not released, at Close
	Ordinal int
}

// NewContext retains the primary context of device ordinal.
func (d *Driver) NewContext(ordinal int) (*Context, error) {
	var c C.CUcontext
	if err := d.check(C.s_retain(d.api, &c, C.int(ordinal)), "cuDevicePrimaryCtxRetain(device %d)", ordinal); err != nil {
		return nil, err
	}
	return &Context{d: d, ctx: c, Ordinal: ordinal}, nil
}

// NewOwnContext creates a context of device ordinal beside its primary one (cuCtxCreate):
// memory, modules and streams of the two are apart, as on two cards. It exists so that tests
// can run one card as the main GPU and a helper GPU at once.
func (d *Driver) NewOwnContext(ordinal int) (*Context, error) {
	var c C.CUcontext
	if err := d.check(C.s_create(d.api, &c, C.int(ordinal)), "cuCtxCreate(device %d)", ordinal); err != nil {
		return nil, err
	}
	return &Context{d: d, ctx: c, own: true, Ordinal: ordinal}, nil
}

// Own says whether the context is one of its own (NewOwnContext) rather than the primary.
func (c *Context) Own() bool { return c.own }

// Close releases the primary context, or destroys one of its own. Everything allocated in
// it must be freed first.
func (c *Context) Close() error {
	if c == nil || c.ctx == nil {
		return nil
	}
	ctx := c.ctx
	c.ctx = nil
	if c.own {
		return c.d.check(C.s_destroy(c.d.api, ctx), "cuCtxDestroy(device %d)", c.Ordinal)
	}
	return c.d.check(C.s_release(c.d.api, C.int(c.Ordinal)), "cuDevicePrimaryCtxRelease(device %d)", c.Ordinal)
}

// Driver returns the driver this context belongs to.
func (c *Context) Driver() *Driver { return c.d }

// Synchronize waits for all work in the context.
func (c *Context) Synchronize() error {
	return c.d.check(C.s_sync(c.d.api, c.ctx), "cuCtxSynchronize(device %d)", c.Ordinal)
}

// MemInfo reports free and total device memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	var f, t C.size_t
	err = c.d.check(C.s_meminfo(c.d.api, c.ctx, &f, &t), "cuMemGetInfo(device %d)", c.Ordinal)
	return uint64(f), uint64(t), err
}

// DevicePtr is an address in device memory (or a mapped host buffer's device address).
type DevicePtr uint64

// Add offsets p by n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

// Alloc allocates n bytes of device memory.
func (c *Context) Alloc(n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: cuMemAlloc(%d bytes): size must be positive", n)
	}
	var p C.CUdeviceptr
	if err := c.d.check(C.s_alloc(c.d.api, c.ctx, &p, C.size_t(n)), "cuMemAlloc(%d bytes)", n); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// Free releases device memory from Alloc. Freeing 0 is a no-op.
func (c *Context) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return c.d.check(C.s_free(c.d.api, c.ctx, C.CUdeviceptr(p)), "cuMemFree(%#x)", uint64(p))
}

// HostBuffer is page-locked host memory mapped into the device's address space.
type HostBuffer struct {
	c          *Context
	Bytes      []byte    // the host view
	Dev        DevicePtr // the device view of the same bytes (zero-copy reads over PCIe)
	registered bool      // from HostRegister: unregister, don't free
}

// cuMemHostAlloc / cuMemHostRegister flags.
const (
	hostAllocPortable  = 0x01
	hostAllocDeviceMap = 0x02
	hostRegisterMapped = 0x02
)

// HostAlloc allocates n bytes of pinned, portable, device-mapped host memory.
func (c *Context) HostAlloc(n int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cuMemHostAlloc(%d bytes): size must be positive", n)
	}
	var p unsafe.Pointer
	if err := c.d.check(C.s_hostalloc(c.d.api, c.ctx, &p, C.size_t(n), hostAllocPortable|hostAllocDeviceMap), "cuMemHostAlloc(%d bytes)", n); err != nil {
		return nil, err
	}
	hb := &HostBuffer{c: c, Bytes: unsafe.Slice((*byte)(p), n)}
	var dp C.CUdeviceptr
	if err := c.d.check(C.s_hostdevptr(c.d.api, c.ctx, &dp, C.uintptr_t(uintptr(p))), "cuMemHostGetDevicePointer(%d bytes)", n); err != nil {
		_ = c.d.check(C.s_freehost(c.d.api, c.ctx, p), "cuMemFreeHost")
		return nil, err
	}
	hb.Dev = DevicePtr(dp)
	return hb, nil
}

// HostRegister page-locks and maps memory the caller owns (for example an mmap'd file
// region; not Go heap memory, which the runtime may reuse). Call Free to unregister.
func (c *Context) HostRegister(mem []byte) (*HostBuffer, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("cuda: cuMemHostRegister: empty region")
	}
	p := uintptr(unsafe.Pointer(&mem[0]))
	if err := c.d.check(C.s_hostregister(c.d.api, c.ctx, C.uintptr_t(p), C.size_t(len(mem)), hostRegisterMapped), "cuMemHostRegister(%#x, %d bytes)", p, len(mem)); err != nil {
		return nil, err
	}
	var dp C.CUdeviceptr
	if err := c.d.check(C.s_hostdevptr(c.d.api, c.ctx, &dp, C.uintptr_t(p)), "cuMemHostGetDevicePointer(%#x)", p); err != nil {
		_ = c.d.check(C.s_hostunregister(c.d.api, c.ctx, C.uintptr_t(p)), "cuMemHostUnregister")
		return nil, err
	}
	return &HostBuffer{c: c, Bytes: mem, Dev: DevicePtr(dp), registered: true}, nil
}

// Free releases (or unregisters) the buffer. The Bytes slice must not be used afterwards.
func (h *HostBuffer) Free() error {
	if h == nil || h.Bytes == nil {
		return nil
	}
	p := unsafe.Pointer(&h.Bytes[0])
	n := len(h.Bytes)
	h.Bytes, h.Dev = nil, 0
	if h.registered {
		return h.c.d.check(C.s_hostunregister(h.c.d.api, h.c.ctx, C.uintptr_t(uintptr(p))), "cuMemHostUnregister(%d bytes)", n)
	}
	return h.c.d.check(C.s_freehost(h.c.d.api, h.c.ctx, p), "cuMemFreeHost(%d bytes)", n)
}
