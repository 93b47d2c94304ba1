package platform

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/windows"
)

// winNVML calls nvml.dll directly: go-nvml does not build for Windows.
type winNVML struct {
	dll  *windows.LazyDLL
	devs map[int]uintptr // nvmlDevice_t handles by index
}

// openNVML loads nvml.dll from System32 (drivers since 2019 put it there) or from the older
// NVSMI folder.
func openNVML(bool) (nvmlAPI, error) {
	candidates := []*windows.LazyDLL{windows.NewLazySystemDLL("nvml.dll")}
	for _, env := range []string{"ProgramW6432", "ProgramFiles"} {
		if pf := os.Getenv(env); pf != "" {
			candidates = append(candidates, windows.NewLazyDLL(filepath.Join(pf, "NVIDIA Corporation", "NVSMI", "nvml.dll")))
			break
		}
	}
	var errs []error
	for _, dll := range candidates {
		if err := dll.Load(); err != nil {
			errs = append(errs, err)
			continue
		}
		return &winNVML{dll: dll, devs: map[int]uintptr{}}, nil
	}
	return nil, errors.Join(errs...)
}

// call runs one NVML function and turns its nvmlReturn_t into an error.
func (w *winNVML) call(name string, args ...uintptr) error {
	p := w.dll.NewProc(name)
	if err := p.Find(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r, _, _ := p.Call(args...)
	if r != 0 {
		return fmt.Errorf("%s: %w", name, nvmlError(r))
	}
	return nil
}

func (w *winNVML) Init() error     { return w.call("nvmlInit_v2") }
func (w *winNVML) Shutdown() error { return w.call("nvmlShutdown") }

func (w *winNVML) DriverVersion() (string, error) {
	buf := make([]byte, 96)
	err := w.call("nvmlSystemGetDriverVersion", uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	return windows.ByteSliceToString(buf), err
}

func (w *winNVML) CUDADriverVersion() (int, error) {
	var v int32
	err := w.call("nvmlSystemGetCudaDriverVersion", uintptr(unsafe.Pointer(&v)))
	return int(v), err
}

func (w *winNVML) DeviceCount() (int, error) {
	var n uint32
	err := w.call("nvmlDeviceGetCount_v2", uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

func (w *winNVML) device(i int) (uintptr, error) {
	if h, ok := w.devs[i]; ok {
		return h, nil
	}
	var h uintptr
	if err := w.call("nvmlDeviceGetHandleByIndex_v2", uintptr(i), uintptr(unsafe.Pointer(&h))); err != nil {
		return 0, err
	}
	w.devs[i] = h
	return h, nil
}

func (w *winNVML) DeviceName(i int) (string, error) {
	h, err := w.device(i)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 96)
	err = w.call("nvmlDeviceGetName", h, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	return windows.ByteSliceToString(buf), err
}

func (w *winNVML) DeviceMemory(i int) (total, free uint64, err error) {
	h, err := w.device(i)
	if err != nil {
		return 0, 0, err
	}
	var m struct{ total, free, used uint64 } // nvmlMemory_t
	err = w.call("nvmlDeviceGetMemoryInfo", h, uintptr(unsafe.Pointer(&m)))
	return m.total, m.free, err
}

func (w *winNVML) DevicePCIe(i int) (gen, width int, err error) {
	h, err := w.device(i)
	if err != nil {
		return 0, 0, err
	}
	var g, wd uint32
	if err := w.call("nvmlDeviceGetCurrPcieLinkGeneration", h, uintptr(unsafe.Pointer(&g))); err != nil {
		return 0, 0, err
	}
	err = w.call("nvmlDeviceGetCurrPcieLinkWidth", h, uintptr(unsafe.Pointer(&wd)))
	return int(g), int(wd), err
}

func (w *winNVML) DeviceComputeCapability(i int) (major, minor int, err error) {
	h, err := w.device(i)
	if err != nil {
		return 0, 0, err
	}
	var ma, mi int32
	err = w.call("nvmlDeviceGetCudaComputeCapability", h, uintptr(unsafe.Pointer(&ma)), uintptr(unsafe.Pointer(&mi)))
	return int(ma), int(mi), err
}

func (w *winNVML) DeviceDisplayActive(i int) (bool, error) {
	h, err := w.device(i)
	if err != nil {
		return false, err
	}
	var on uint32 // nvmlEnableState_t
	err = w.call("nvmlDeviceGetDisplayActive", h, uintptr(unsafe.Pointer(&on)))
	return on == 1, err
}
