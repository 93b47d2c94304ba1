//go:build linux && cgo

package platform

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// goNVML adapts github.com/NVIDIA/go-nvml (which dlopens libnvidia-ml.so.1) to nvmlAPI.
type goNVML struct {
	lib  nvml.Interface
	devs map[int]nvml.Device
}

// openNVML finds libnvidia-ml. Under WSL2 it lives in /usr/lib/wsl/lib, which is not always on
// the loader's path.
func openNVML(wsl2 bool) (nvmlAPI, error) {
	paths := []string{"libnvidia-ml.so.1"}
	if wsl2 {
		paths = append(paths, "/usr/lib/wsl/lib/libnvidia-ml.so.1")
	}
	var errs []error
	for _, p := range paths {
		lib := nvml.New(nvml.WithLibraryPath(p))
		if ret := lib.Init(); ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("%s: %w", p, nvmlError(ret)))
			continue
		}
		lib.Shutdown() // gpusFrom calls Init again; NVML counts references
		return &goNVML{lib: lib, devs: map[int]nvml.Device{}}, nil
	}
	return nil, errors.Join(errs...)
}

func ret(r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return nvmlError(r)
}

func (g *goNVML) Init() error     { return ret(g.lib.Init()) }
func (g *goNVML) Shutdown() error { return ret(g.lib.Shutdown()) }

func (g *goNVML) DriverVersion() (string, error) {
	v, r := g.lib.SystemGetDriverVersion()
	return v, ret(r)
}

func (g *goNVML) CUDADriverVersion() (int, error) {
	v, r := g.lib.SystemGetCudaDriverVersion()
	return v, ret(r)
}

func (g *goNVML) DeviceCount() (int, error) {
	n, r := g.lib.DeviceGetCount()
	return n, ret(r)
}

func (g *goNVML) device(i int) (nvml.Device, error) {
	if d, ok := g.devs[i]; ok {
		return d, nil
	}
	d, r := g.lib.DeviceGetHandleByIndex(i)
	if err := ret(r); err != nil {
		return nil, err
	}
	g.devs[i] = d
	return d, nil
}

func (g *goNVML) DeviceName(i int) (string, error) {
	d, err := g.device(i)
	if err != nil {
		return "", err
	}
	s, r := d.GetName()
	return s, ret(r)
}

func (g *goNVML) DeviceMemory(i int) (total, free uint64, err error) {
	d, err := g.device(i)
	if err != nil {
		return 0, 0, err
	}
	m, r := d.GetMemoryInfo()
	return m.Total, m.Free, ret(r)
}

func (g *goNVML) DevicePCIe(i int) (gen, width int, err error) {
	d, err := g.device(i)
	if err != nil {
		return 0, 0, err
	}
	gen, r := d.GetCurrPcieLinkGeneration()
	if err := ret(r); err != nil {
		return 0, 0, err
	}
	width, r = d.GetCurrPcieLinkWidth()
	return gen, width, ret(r)
}

func (g *goNVML) DeviceComputeCapability(i int) (major, minor int, err error) {
	d, err := g.device(i)
	if err != nil {
		return 0, 0, err
	}
	major, minor, r := d.GetCudaComputeCapability()
	return major, minor, ret(r)
}

func (g *goNVML) DeviceDisplayActive(i int) (bool, error) {
	d, err := g.device(i)
	if err != nil {
		return false, err
	}
	s, r := d.GetDisplayActive()
	return s == nvml.FEATURE_ENABLED, ret(r)
}
