// Package wizard decides how Strata should run a model on a machine: where the experts go
// (all on the GPU, the default arena, resident, tiered, or CPU only), the engine.Config that
// says so, and the reasons in plain words. Recommend is a pure function of two plain values,
// Hardware and Model, so the app's wizard, `strata hw` and the tests all get the same answer.
package wizard

import (
	"strata/engine"
	"strata/engine/kv"
	"strata/platform"
)

// GPU is one NVIDIA card as the decision sees it.
type GPU struct {
	Index     int // NVML index
	Name      string
	VRAMTotal int64
	VRAMFree  int64 // 0 = unknown: plan on the total
	Display   bool  // drives a desktop: keep more VRAM free
	PCIeGen   int
	PCIeWidth int
	// Compute capability (8.9 for Ada); 0 = unknown, assumed new enough.
	ComputeMajor, ComputeMinor int
}

// Hardware is the machine, reduced to what the decision needs.
type Hardware struct {
	RAMTotal      int64
	RAMAvailable  int64 // 0 = unknown: plan on 80% of the total
	PhysicalCores int
	GPUs          []GPU
	WSL2          bool
	PinnedBudget  int64 // page-locked RAM the GPU driver grants; 0 = limited only by RAM
	Drive         platform.DriveClass
	DriveMBps     float64 // sequential read speed of the drive holding the model; 0 = unknown
	DriveFS       string  // its filesystem, where known ("9p" is a Windows drive seen from WSL2)
}

// HardwareFromHost builds Hardware from platform facts; drive is the probe of the model
// file's drive, nil when there is no model yet.
func HardwareFromHost(h platform.Host, drive *platform.Drive) Hardware {
	hw := Hardware{
		RAMTotal:      h.RAM.TotalBytes,
		RAMAvailable:  h.RAM.AvailableBytes,
		PhysicalCores: h.CPU.PhysicalCores,
		WSL2:          h.WSL.WSL2,
		PinnedBudget:  h.WSL.PinnedBudgetBytes,
		Drive:         platform.DriveUnknown,
	}
	for _, g := range h.GPUs.Devices {
		hw.GPUs = append(hw.GPUs, GPU{
			Index: g.Index, Name: g.Name, VRAMTotal: g.VRAMTotalBytes, VRAMFree: g.VRAMFreeBytes,
			Display: g.DisplayActive, PCIeGen: g.PCIeGen, PCIeWidth: g.PCIeWidth,
			ComputeMajor: g.ComputeMajor, ComputeMinor: g.ComputeMinor,
		})
	}
	if drive != nil && drive.Read.Class != "" {
		hw.Drive, hw.DriveMBps = drive.Read.Class, drive.Read.MBps
	}
	if drive != nil {
		hw.DriveFS = drive.FS
	}
	return hw
}

// Model is a model file, reduced to what the decision needs.
type Model struct {
	Name           string
	FileBytes      int64
	ExpertBytes    int64 // all routed experts
	NonExpertBytes int64 // everything else: embeddings, attention, norms, router, shared experts
	Layers         int   // MoE layers
	Experts        int   // routed experts per layer
	ExpertsUsed    int   // experts routed per token
	ContextLength  int   // trained context
	// ContextLimit is the most context the model takes (engine.ModelInfo.ContextLimit: the
	// trained one, or YaRN's); 0 = ContextLength.
	ContextLimit int
	// KVBytesPerToken is the f16 KV cache of one token over all layers; 0 = estimated as
	// 2 KiB per layer (4 KV heads of 128, the common MoE shape).
	KVBytesPerToken int64
	// KVInt8BytesPerToken is the same cache with --kv int8; 0 = 9/16 of the f16 one (a byte
	// a value and a float32 scale per 32).
	KVInt8BytesPerToken int64
	// GPULacks says what of the model the GPU plans cannot run yet (Gated DeltaNet shapes
	// past the GPU kernels'): such a model runs on the CPU. "" = they run it.
	GPULacks string
}

// ModelFromInfo takes what the decision needs from engine.Inspect's answer. The KV cache per
// token is f16 K and V for every layer but gpt-oss's sliding-window ones and the hybrids'
// Gated DeltaNet ones, whose fixed ring or recurrent state counts with the non-expert weights.
func ModelFromInfo(mi engine.ModelInfo) Model {
	name := mi.Name
	if name == "" {
		name = mi.Path
	}
	m := Model{
		Name: name, FileBytes: mi.FileBytes, ExpertBytes: mi.ExpertBytes, NonExpertBytes: mi.NonExpertBytes,
		Layers: mi.Layers, Experts: mi.Experts, ExpertsUsed: mi.ExpertsUsed, ContextLength: mi.ContextLength,
		ContextLimit: mi.ContextLimit,
	}
	if mi.Layers > 0 && mi.KVHeads > 0 && mi.HeadDim > 0 {
		full := max(mi.Layers-mi.RingLayers-mi.RecurrentLayers, 1)
		m.KVBytesPerToken = int64(full) * int64(mi.KVHeads) * int64(mi.HeadDim) * 2 * 2
		m.KVInt8BytesPerToken = kv.Bytes(full, mi.KVHeads, mi.HeadDim, 1, kv.Int8)
		m.NonExpertBytes += int64(mi.RingLayers)*int64(mi.RingKeep)*int64(mi.KVHeads)*int64(mi.HeadDim)*2*2 + mi.RecurrentBytes
	}
	m.GPULacks = engine.GPULacks(mi)
	return m
}
