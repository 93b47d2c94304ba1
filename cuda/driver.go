// Package cuda drives NVIDIA GPUs through the CUDA driver API, loaded at run time
// (nvcuda.dll on Windows, libcuda.so.1 on Linux), so one binary runs with or without a
// driver and building needs no CUDA toolkit. It holds devices, contexts, memory,
// streams, events, graphs, and the embedded kernel fatbin with a typed Go launcher per
// kernel. It knows nothing of models.
package cuda

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"

static CUresult s_init(strata_cu *d) { return d->cuInit(0); }
static CUresult s_version(strata_cu *d, int *v) { return d->cuDriverGetVersion(v); }
static const char *s_errname(strata_cu *d, CUresult r) {
	const char *s = NULL;
	if (d->cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}
static CUresult s_count(strata_cu *d, int *n) { return d->cuDeviceGetCount(n); }
static CUresult s_device(strata_cu *d, CUdevice *dev, int i) { return d->cuDeviceGet(dev, i); }
static CUresult s_name(strata_cu *d, char *buf, int n, CUdevice dev) { return d->cuDeviceGetName(buf, n, dev); }
static CUresult s_attr(strata_cu *d, int *v, int a, CUdevice dev) { return d->cuDeviceGetAttribute(v, a, dev); }
static CUresult s_totalmem(strata_cu *d, size_t *v, CUdevice dev) { return d->cuDeviceTotalMem(v, dev); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// ErrNoDriver reports that no usable NVIDIA driver was found; callers fall back to the CPU.
var ErrNoDriver = errors.New("no NVIDIA driver")

// Error is a failed driver call: the call with its arguments and the CUDA error name.
type Error struct {
	Call string // e.g. "cuMemAlloc(1048576 bytes)"
	Code int    // CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *Error) Error() string { return fmt.Sprintf("cuda: %s: %s", e.Call, e.Name) }

// CUresult codes callers may want to tell apart.
const (
	codeOutOfMemory = 2
)

// IsOutOfMemory reports whether err is (or wraps) a CUDA out-of-memory error.
func IsOutOfMemory(err error) bool { return errors.Is(err, ErrOutOfMemory) }

// ErrOutOfMemory matches (errors.Is) every driver call that failed with
// CUDA_ERROR_OUT_OF_MEMORY.
var ErrOutOfMemory = errors.New("out of GPU memory")

// Is makes errors.Is(err, ErrOutOfMemory) true for an out-of-memory failure.
func (e *Error) Is(target error) bool { return target == ErrOutOfMemory && e.Code == codeOutOfMemory }

// Driver is the loaded driver library. It is safe for concurrent use.
type Driver struct {
	api *C.strata_cu
}

// Open loads the driver and initialises it. Without a driver the error wraps ErrNoDriver.
func Open() (*Driver, error) {
	api := (*C.strata_cu)(C.calloc(1, C.size_t(unsafe.Sizeof(C.strata_cu{}))))
	if api == nil {
		return nil, errors.New("cuda: out of host memory")
	}
	var msg [512]C.char
	switch C.strata_cu_open(api, &msg[0], C.int(len(msg))) {
	case 0:
	case 1:
		C.free(unsafe.Pointer(api))
		return nil, fmt.Errorf("cuda: %w (%s)", ErrNoDriver, C.GoString(&msg[0]))
	default:
		C.free(unsafe.Pointer(api))
		return nil, fmt.Errorf("cuda: %w: %s", ErrNoDriver, C.GoString(&msg[0]))
	}
	d := &Driver{api: api}
	if err := d.check(C.s_init(api), "cuInit"); err != nil {
		d.Close()
		// cuInit fails with CUDA_ERROR_NO_DEVICE or a driver mismatch: same fallback.
		return nil, fmt.Errorf("%w (%w)", err, ErrNoDriver)
	}
	return d, nil
}

// Close unloads the library. Every context, buffer and module must be released first.
func (d *Driver) Close() {
	if d == nil || d.api == nil {
		return
	}
	C.strata_cu_close(d.api)
	C.free(unsafe.Pointer(d.api))
	d.api = nil
}

// check turns a CUresult into an *Error naming the call.
func (d *Driver) check(r C.CUresult, call string, args ...any) error {
	if r == 0 {
		return nil
	}
	name := fmt.Sprintf("CUDA error %d", int(r))
	if s := C.s_errname(d.api, r); s != nil {
		name = C.GoString(s)
	}
	if len(args) > 0 {
		call = fmt.Sprintf(call, args...)
	}
	return &Error{Call: call, Code: int(r), Name: name}
}

// Version is the driver's CUDA version, e.g. 13000 for 13.0.
func (d *Driver) Version() (int, error) {
	var v C.int
	if err := d.check(C.s_version(d.api, &v), "cuDriverGetVersion"); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount is the number of CUDA devices the driver sees.
func (d *Driver) DeviceCount() (int, error) {
	var n C.int
	if err := d.check(C.s_count(d.api, &n), "cuDeviceGetCount"); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceInfo describes one device.
type DeviceInfo struct {
	Index           int
	Name            string
	Major, Minor    int // compute capability
	TotalMemory     uint64
	Multiprocessors int
	L2Bytes         int
	SharedPerBlock  int // opt-in maximum dynamic shared memory per block, bytes
	Integrated      bool
	CanMapHost      bool
}

// Device attribute ids (CUdevice_attribute).
const (
	attrMultiprocessors   = 16
	attrIntegrated        = 18
	attrCanMapHostMemory  = 19
	attrComputeMajor      = 75
	attrComputeMinor      = 76
	attrL2CacheSize       = 38
	attrSharedOptinPerBlk = 97
)

func (d *Driver) device(i int) (C.CUdevice, error) {
	var dev C.CUdevice
	return dev, d.check(C.s_device(d.api, &dev, C.int(i)), "cuDeviceGet(%d)", i)
}

// Device describes device i.
func (d *Driver) Device(i int) (DeviceInfo, error) {
	dev, err := d.device(i)
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Index: i}
	var name [256]C.char
	if err := d.check(C.s_name(d.api, &name[0], C.int(len(name)), dev), "cuDeviceGetName(%d)", i); err != nil {
		return info, err
	}
	info.Name = C.GoString(&name[0])
	var total C.size_t
	if err := d.check(C.s_totalmem(d.api, &total, dev), "cuDeviceTotalMem(%d)", i); err != nil {
		return info, err
	}
	info.TotalMemory = uint64(total)
	attrs := []struct {
		id  int
		dst *int
	}{
		{attrComputeMajor, &info.Major}, {attrComputeMinor, &info.Minor},
		{attrMultiprocessors, &info.Multiprocessors}, {attrL2CacheSize, &info.L2Bytes},
		{attrSharedOptinPerBlk, &info.SharedPerBlock},
	}
	for _, a := range attrs {
		var v C.int
		if err := d.check(C.s_attr(d.api, &v, C.int(a.id), dev), "cuDeviceGetAttribute(%d, device %d)", a.id, i); err != nil {
			return info, err
		}
		*a.dst = int(v)
	}
	var integ, mapHost C.int
	if err := d.check(C.s_attr(d.api, &integ, attrIntegrated, dev), "cuDeviceGetAttribute(integrated, device %d)", i); err != nil {
		return info, err
	}
	if err := d.check(C.s_attr(d.api, &mapHost, attrCanMapHostMemory, dev), "cuDeviceGetAttribute(canMapHost, device %d)", i); err != nil {
		return info, err
	}
	info.Integrated, info.CanMapHost = integ != 0, mapHost != 0
	return info, nil
}

// Devices describes every device.
func (d *Driver) Devices() ([]DeviceInfo, error) {
	n, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		info, err := d.Device(i)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

// keepAlive is used where a Go slice's memory is handed to the driver for the length of a call.
func keepAlive(x any) { runtime.KeepAlive(x) }
