package platform

import (
	"fmt"
	"strings"
)

// GPU is one NVIDIA card as NVML sees it.
type GPU struct {
	Index          int    `json:"index"` // NVML's index
	Name           string `json:"name"`
	VRAMTotalBytes int64  `json:"vram_total_bytes"`
	VRAMFreeBytes  int64  `json:"vram_free_bytes"`
	PCIeGen        int    `json:"pcie_gen"`   // current link generation; 0 = unknown
	PCIeWidth      int    `json:"pcie_width"` // current lanes; 0 = unknown
	DisplayActive  bool   `json:"display_active"`
	ComputeMajor   int    `json:"compute_major"` // CUDA compute capability, 8.9 = Ada; 0 = unknown
	ComputeMinor   int    `json:"compute_minor"`
}

// GPUs is the NVML answer. An empty list with a Reason is a normal answer (no driver, no card).
type GPUs struct {
	Devices []GPU  `json:"devices"`
	Driver  string `json:"driver,omitempty"` // driver version, "572.16"
	CUDA    string `json:"cuda,omitempty"`   // highest CUDA version the driver supports, "12.8"
	Reason  string `json:"reason,omitempty"` // why the list is empty or a card is missing
}

// nvmlAPI is the seam between NVML (go-nvml on Linux, nvml.dll on Windows) and gpusFrom. Its
// methods are the NVML calls Strata makes, by device index, with errors instead of codes.
type nvmlAPI interface {
	Init() error
	Shutdown() error
	DriverVersion() (string, error)
	CUDADriverVersion() (int, error) // 1000*major + 10*minor, as NVML encodes it
	DeviceCount() (int, error)
	DeviceName(i int) (string, error)
	DeviceMemory(i int) (total, free uint64, err error)
	DevicePCIe(i int) (gen, width int, err error)
	DeviceDisplayActive(i int) (bool, error)
	DeviceComputeCapability(i int) (major, minor int, err error)
}

// gpusFrom asks NVML about every card. A card whose name or memory cannot be read is left out
// and the reason says so; a missing PCIe or display answer only leaves that field unknown.
func gpusFrom(api nvmlAPI) GPUs {
	if err := api.Init(); err != nil {
		return GPUs{Reason: "NVML did not start: " + err.Error()}
	}
	defer api.Shutdown()
	var g GPUs
	var notes []string
	if v, err := api.DriverVersion(); err == nil {
		g.Driver = v
	} else {
		notes = append(notes, "driver version unknown: "+err.Error())
	}
	if v, err := api.CUDADriverVersion(); err == nil && v > 0 {
		g.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	} else if err != nil {
		notes = append(notes, "CUDA version unknown: "+err.Error())
	}
	n, err := api.DeviceCount()
	if err != nil {
		g.Reason = strings.Join(append(notes, "device count: "+err.Error()), "; ")
		return g
	}
	if n == 0 {
		notes = append(notes, "NVML found no NVIDIA GPU")
	}
	for i := 0; i < n; i++ {
		name, err := api.DeviceName(i)
		if err != nil {
			notes = append(notes, fmt.Sprintf("GPU %d left out: name: %v", i, err))
			continue
		}
		total, free, err := api.DeviceMemory(i)
		if err != nil {
			notes = append(notes, fmt.Sprintf("GPU %d (%s) left out: memory: %v", i, name, err))
			continue
		}
		d := GPU{Index: i, Name: name, VRAMTotalBytes: int64(total), VRAMFreeBytes: int64(free)}
		if gen, width, err := api.DevicePCIe(i); err == nil {
			d.PCIeGen, d.PCIeWidth = gen, width
		}
		if on, err := api.DeviceDisplayActive(i); err == nil {
			d.DisplayActive = on
		}
		if major, minor, err := api.DeviceComputeCapability(i); err == nil {
			d.ComputeMajor, d.ComputeMinor = major, minor
		}
		g.Devices = append(g.Devices, d)
	}
	g.Reason = strings.Join(notes, "; ")
	return g
}

// nvmlError names an NVML return code the way nvml.h does.
type nvmlError int

func (e nvmlError) Error() string {
	switch e {
	case 1:
		return "NVML_ERROR_UNINITIALIZED"
	case 2:
		return "NVML_ERROR_INVALID_ARGUMENT"
	case 3:
		return "NVML_ERROR_NOT_SUPPORTED"
	case 4:
		return "NVML_ERROR_NO_PERMISSION"
	case 6:
		return "NVML_ERROR_NOT_FOUND"
	case 7:
		return "NVML_ERROR_INSUFFICIENT_SIZE"
	case 9:
		return "NVML_ERROR_DRIVER_NOT_LOADED"
	case 12:
		return "NVML_ERROR_LIBRARY_NOT_FOUND"
	case 15:
		return "NVML_ERROR_GPU_IS_LOST"
	case 999:
		return "NVML_ERROR_UNKNOWN"
	}
	return fmt.Sprintf("NVML error %d", int(e))
}
