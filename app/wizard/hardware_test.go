package wizard

import (
	"testing"

	"strata/engine"
	"strata/platform"
)

func TestHardwareFromHost(t *testing.T) {
	h := platform.Host{
		RAM: platform.Memory{TotalBytes: gb(32), AvailableBytes: gb(27)},
		CPU: platform.CPU{PhysicalCores: 8, LogicalCores: 16},
		GPUs: platform.GPUs{Devices: []platform.GPU{
			{Index: 0, Name: "NVIDIA GeForce RTX 4080 SUPER", VRAMTotalBytes: gb(16), VRAMFreeBytes: gb(15), PCIeGen: 4, PCIeWidth: 16, DisplayActive: true},
			{Index: 1, Name: "NVIDIA GeForce RTX 3060", VRAMTotalBytes: gb(12), VRAMFreeBytes: gb(11.5)},
		}},
		WSL: platform.WSL{WSL2: true, PinnedBudgetBytes: platform.WSLPinnedBudgetBytes},
	}
	drive := &platform.Drive{Read: platform.ReadProbe{MBps: 520, Class: platform.DriveSATASSD}}
	hw := HardwareFromHost(h, drive)
	if hw.RAMTotal != gb(32) || hw.RAMAvailable != gb(27) || hw.PhysicalCores != 8 || !hw.WSL2 ||
		hw.PinnedBudget != platform.WSLPinnedBudgetBytes || hw.Drive != platform.DriveSATASSD || hw.DriveMBps != 520 {
		t.Errorf("got %+v", hw)
	}
	if len(hw.GPUs) != 2 || hw.GPUs[0] != (GPU{Index: 0, Name: "NVIDIA GeForce RTX 4080 SUPER", VRAMTotal: gb(16), VRAMFree: gb(15), Display: true, PCIeGen: 4, PCIeWidth: 16}) ||
		hw.GPUs[1].Index != 1 || hw.GPUs[1].Display {
		t.Errorf("GPUs: %+v", hw.GPUs)
	}
	if none := HardwareFromHost(platform.Host{}, nil); none.Drive != platform.DriveUnknown || len(none.GPUs) != 0 {
		t.Errorf("empty host: %+v", none)
	}
}

func TestModelFromInfo(t *testing.T) {
	mi := engine.ModelInfo{Path: "/m/q.gguf", FileBytes: gb(17.3), ExpertBytes: gb(16), NonExpertBytes: gb(1.3),
		Layers: 48, Experts: 128, ExpertsUsed: 8, ContextLength: 40960}
	m := ModelFromInfo(mi)
	want := Model{Name: "/m/q.gguf", FileBytes: gb(17.3), ExpertBytes: gb(16), NonExpertBytes: gb(1.3),
		Layers: 48, Experts: 128, ExpertsUsed: 8, ContextLength: 40960}
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	mi.KVHeads, mi.HeadDim = 4, 128 // Qwen3-30B-A3B: 48 layers x 4 KV heads x 128 x K,V x f16
	if got := ModelFromInfo(mi).KVBytesPerToken; got != 98304 {
		t.Errorf("KV bytes per token %d, want 98304", got)
	}
	mi.Name = "Qwen3-30B-A3B"
	if got := ModelFromInfo(mi).Name; got != "Qwen3-30B-A3B" {
		t.Errorf("name %q", got)
	}
	// A hybrid (Qwen3-Next: 36 of 48 layers Gated DeltaNet) keeps K and V on the other 12;
	// its recurrent state is a fixed cost.
	mi.RecurrentLayers, mi.RecurrentBytes = 36, gb(0.5)
	if got := ModelFromInfo(mi); got.KVBytesPerToken != 98304/4 || got.NonExpertBytes != gb(1.3)+gb(0.5) {
		t.Errorf("hybrid: KV bytes per token %d (want %d), non-expert %d", got.KVBytesPerToken, 98304/4, got.NonExpertBytes)
	}
}
