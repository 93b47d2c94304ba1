package cuda

/*
#include <stdlib.h>
#include "shim.h"

static CUresult s_modload(strata_cu *d, CUcontext c, CUmodule *m, const void *img) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuModuleLoadData(m, img);
}
static CUresult s_modunload(strata_cu *d, CUcontext c, CUmodule m) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuModuleUnload(m);
}
static CUresult s_getfunc(strata_cu *d, CUcontext c, CUfunction *f, CUmodule m, const char *name) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuModuleGetFunction(f, m, name);
}
static CUresult s_funcattr(strata_cu *d, CUcontext c, CUfunction f, int a, int v) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuFuncSetAttribute(f, a, v);
}
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Module is loaded device code (a fatbin, cubin or PTX image).
type Module struct {
	c *Context
	m C.CUmodule
}

// LoadModule loads a fatbin/cubin/PTX image; the driver picks the SASS for this device
// or compiles the PTX.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: cuModuleLoadData: empty image")
	}
	var m C.CUmodule
	err := c.d.check(C.s_modload(c.d.api, c.ctx, &m, unsafe.Pointer(&image[0])), "cuModuleLoadData(%d bytes, device %d)", len(image), c.Ordinal)
	keepAlive(image)
	if err != nil {
		return nil, err
	}
	return &Module{c: c, m: m}, nil
}

// Unload releases the module.
func (m *Module) Unload() error {
	if m == nil || m.m == nil {
		return nil
	}
	mm := m.m
	m.m = nil
	return m.c.d.check(C.s_modunload(m.c.d.api, m.c.ctx, mm), "cuModuleUnload")
}

// Function is one kernel of a module.
type Function struct {
	c    *Context
	f    C.CUfunction
	Name string
	// early: launched with programmatic stream serialization (launchesEarly), so that it
	// may start before the kernel ahead of it ends; the kernel waits for that one itself.
	early bool
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	if err := m.c.d.check(C.s_getfunc(m.c.d.api, m.c.ctx, &f, m.m, cs), "cuModuleGetFunction(%q)", name); err != nil {
		return nil, err
	}
	return &Function{c: m.c, f: f, Name: name}, nil
}

// SetMaxDynamicShared raises the kernel's dynamic shared-memory limit (needed above 48 KiB).
func (f *Function) SetMaxDynamicShared(bytes int) error {
	const attrMaxDynamicShared = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	return f.c.d.check(C.s_funcattr(f.c.d.api, f.c.ctx, f.f, attrMaxDynamicShared, C.int(bytes)), "cuFuncSetAttribute(%s, max dynamic shared %d)", f.Name, bytes)
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Args collects kernel parameters, one 8-byte slot each (little-endian: a 4-byte
// parameter is read from the start of its slot).
type Args struct{ slots []uint64 }

// Ptr appends a device pointer.
func (a *Args) Ptr(p DevicePtr) *Args { a.slots = append(a.slots, uint64(p)); return a }

// Int appends an int32 parameter.
func (a *Args) Int(v int) *Args { a.slots = append(a.slots, uint64(uint32(int32(v)))); return a }

// Int64 appends an int64 parameter.
func (a *Args) Int64(v int64) *Args { a.slots = append(a.slots, uint64(v)); return a }

// Float appends a float32 parameter.
func (a *Args) Float(v float32) *Args {
	a.slots = append(a.slots, uint64(math.Float32bits(v)))
	return a
}

// Launch queues f on s.
func (f *Function) Launch(s *Stream, grid, block Dim3, sharedBytes int, args *Args) error {
	g := fixDim(grid)
	b := fixDim(block)
	var slots []uint64
	if args != nil {
		slots = args.slots
	}
	var p *C.uint64_t
	if len(slots) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&slots[0]))
	}
	r := C.strata_cu_launch(f.c.d.api, f.c.ctx, f.f, C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
		C.uint(b.X), C.uint(b.Y), C.uint(b.Z), C.uint(sharedBytes), s.s, p, C.int(len(slots)), cBool(f.early))
	keepAlive(slots)
	return f.c.d.check(r, "cuLaunchKernel(%s, grid %dx%dx%d, block %dx%dx%d)", f.Name, g.X, g.Y, g.Z, b.X, b.Y, b.Z)
}

func fixDim(d Dim3) Dim3 {
	if d.X < 1 {
		d.X = 1
	}
	if d.Y < 1 {
		d.Y = 1
	}
	if d.Z < 1 {
		d.Z = 1
	}
	return d
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
