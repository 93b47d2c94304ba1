package platform

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeNVML is the only fake in the package: it stands where NVML's answers enter gpusFrom.
type fakeNVML struct {
	initErr   error
	driver    string
	cuda      int
	count     int
	countErr  error
	names     map[int]string
	memory    map[int][2]uint64 // total, free
	pcie      map[int][2]int
	display   map[int]bool
	compute   map[int][2]int
	shutdowns int
}

func (f *fakeNVML) Init() error                     { return f.initErr }
func (f *fakeNVML) Shutdown() error                 { f.shutdowns++; return nil }
func (f *fakeNVML) DriverVersion() (string, error)  { return f.driver, nil }
func (f *fakeNVML) CUDADriverVersion() (int, error) { return f.cuda, nil }
func (f *fakeNVML) DeviceCount() (int, error)       { return f.count, f.countErr }

func (f *fakeNVML) DeviceName(i int) (string, error) {
	if n, ok := f.names[i]; ok {
		return n, nil
	}
	return "", nvmlError(15)
}

func (f *fakeNVML) DeviceMemory(i int) (uint64, uint64, error) {
	if m, ok := f.memory[i]; ok {
		return m[0], m[1], nil
	}
	return 0, 0, nvmlError(3)
}

func (f *fakeNVML) DevicePCIe(i int) (int, int, error) {
	if p, ok := f.pcie[i]; ok {
		return p[0], p[1], nil
	}
	return 0, 0, nvmlError(3)
}

func (f *fakeNVML) DeviceDisplayActive(i int) (bool, error) {
	if d, ok := f.display[i]; ok {
		return d, nil
	}
	return false, nvmlError(3)
}

func (f *fakeNVML) DeviceComputeCapability(i int) (int, int, error) {
	if c, ok := f.compute[i]; ok {
		return c[0], c[1], nil
	}
	return 0, 0, nvmlError(3)
}

func TestGPUsFrom(t *testing.T) {
	const gib = 1 << 30
	t.Run("init fails", func(t *testing.T) {
		g := gpusFrom(&fakeNVML{initErr: nvmlError(9)})
		if len(g.Devices) != 0 || !strings.Contains(g.Reason, "NVML_ERROR_DRIVER_NOT_LOADED") {
			t.Errorf("got %+v", g)
		}
	})
	t.Run("no gpu", func(t *testing.T) {
		f := &fakeNVML{driver: "580.95.05", cuda: 13000}
		g := gpusFrom(f)
		if len(g.Devices) != 0 || g.Reason != "NVML found no NVIDIA GPU" || g.CUDA != "13.0" || f.shutdowns != 1 {
			t.Errorf("got %+v, shutdowns %d", g, f.shutdowns)
		}
	})
	t.Run("count fails", func(t *testing.T) {
		g := gpusFrom(&fakeNVML{countErr: nvmlError(999)})
		if len(g.Devices) != 0 || !strings.Contains(g.Reason, "device count: NVML_ERROR_UNKNOWN") {
			t.Errorf("got %+v", g)
		}
	})
	t.Run("three cards, one lost", func(t *testing.T) {
		f := &fakeNVML{
			driver: "572.16", cuda: 12080, count: 3,
			names:   map[int]string{0: "NVIDIA GeForce RTX 4080 SUPER", 2: "NVIDIA GeForce RTX 3060"},
			memory:  map[int][2]uint64{0: {16 * gib, 15 * gib}, 2: {12 * gib, 11 * gib}},
			pcie:    map[int][2]int{0: {4, 16}},
			display: map[int]bool{0: true, 2: false},
			compute: map[int][2]int{0: {8, 9}},
		}
		g := gpusFrom(f)
		want := []GPU{
			{Index: 0, Name: "NVIDIA GeForce RTX 4080 SUPER", VRAMTotalBytes: 16 * gib, VRAMFreeBytes: 15 * gib, PCIeGen: 4, PCIeWidth: 16, DisplayActive: true, ComputeMajor: 8, ComputeMinor: 9},
			{Index: 2, Name: "NVIDIA GeForce RTX 3060", VRAMTotalBytes: 12 * gib, VRAMFreeBytes: 11 * gib},
		}
		if len(g.Devices) != len(want) {
			t.Fatalf("got %+v", g)
		}
		for i := range want {
			if g.Devices[i] != want[i] {
				t.Errorf("device %d: got %+v, want %+v", i, g.Devices[i], want[i])
			}
		}
		if g.Driver != "572.16" || g.CUDA != "12.8" || !strings.Contains(g.Reason, "GPU 1 left out") {
			t.Errorf("got driver %q cuda %q reason %q", g.Driver, g.CUDA, g.Reason)
		}
	})
	t.Run("memory unreadable", func(t *testing.T) {
		g := gpusFrom(&fakeNVML{count: 1, names: map[int]string{0: "Tesla"}})
		if len(g.Devices) != 0 || !strings.Contains(g.Reason, "GPU 0 (Tesla) left out: memory: NVML_ERROR_NOT_SUPPORTED") {
			t.Errorf("got %+v", g)
		}
	})
}

// TestProbeGPUsOnThisHost runs the real NVML path: on a machine without the NVIDIA driver
// it must be an empty list with a reason, on one with it every card must be described.
func TestProbeGPUsOnThisHost(t *testing.T) {
	g := probeGPUsWithin(context.Background(), probeWSL().WSL2)
	if len(g.Devices) == 0 {
		if g.Reason == "" {
			t.Fatal("no GPU and no reason")
		}
		t.Logf("no GPU: %s", g.Reason)
		return
	}
	for _, d := range g.Devices {
		if d.Name == "" || d.VRAMTotalBytes <= 0 || d.VRAMFreeBytes > d.VRAMTotalBytes {
			t.Errorf("implausible GPU %+v", d)
		}
	}
	if g.Driver == "" {
		t.Errorf("GPUs but no driver version: %+v", g)
	}
}

func TestNVMLErrorNames(t *testing.T) {
	if got := nvmlError(12).Error(); got != "NVML_ERROR_LIBRARY_NOT_FOUND" {
		t.Errorf("12 = %q", got)
	}
	if got := nvmlError(77).Error(); got != "NVML error 77" {
		t.Errorf("77 = %q", got)
	}
	var e nvmlError
	if !errors.As(error(nvmlError(3)), &e) || e != 3 {
		t.Error("nvmlError does not unwrap")
	}
}
