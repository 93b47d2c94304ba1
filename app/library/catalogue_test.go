package library

import (
	"strings"
	"testing"

	"strata/app/wizard"
	"strata/platform"
)

// pc32 is the PC the catalogue is sized for: 32 GB of RAM, a 16 GB card driving the
// screen, an NVMe SSD.
func pc32() wizard.Hardware {
	return wizard.Hardware{
		RAMTotal: 32 << 30, RAMAvailable: 28 << 30, PhysicalCores: 8,
		GPUs:  []wizard.GPU{{Index: 0, Name: "RTX 4080", VRAMTotal: 16 << 30, VRAMFree: 15 << 30, Display: true, PCIeGen: 4, PCIeWidth: 16}},
		Drive: platform.DriveNVMe, DriveMBps: 3500,
	}
}

func TestCatalogue(t *testing.T) {
	entries, err := Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpt-oss-20b", "gpt-oss-120b", "qwen3-30b-a3b-2507", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b", "glm-4.5-air", "qwen3-235b-a22b-2507"}
	ids := map[string]Entry{}
	for _, e := range entries {
		ids[e.ID] = e
		if !strings.HasSuffix(e.Repo, "-GGUF") || !strings.Contains(e.Ref(), ":") {
			t.Errorf("%s: repository %q", e.ID, e.Repo)
		}
	}
	for _, id := range want {
		if _, ok := ids[id]; !ok {
			t.Errorf("the catalogue lacks %s", id)
		}
	}
	hw := pc32()
	verdicts := map[string]Verdict{}
	for _, e := range entries {
		v := Judge(hw, e)
		verdicts[e.ID] = v
		// The verdict's mode is the wizard's for the same model on the same PC.
		if r := wizard.Recommend(hw, e.WizardModel()); r.Mode != v.Mode {
			t.Errorf("%s: mode %s, the wizard says %s", e.ID, v.Mode, r.Mode)
		}
		if v.Words == "" || v.Speed == "" || v.Reason == "" {
			t.Errorf("%s: verdict %+v", e.ID, v)
		}
	}
	// On this PC: gpt-oss-20b fits the 16 GB card whole, the 30B runs on the GPU and RAM,
	// the largest reads the SSD.
	if v := verdicts["gpt-oss-20b"]; v.Mode != wizard.ModeAllGPU || v.TooBig || v.Speed != SpeedFast {
		t.Errorf("gpt-oss-20b: %+v", v)
	}
	if v := verdicts["qwen3-30b-a3b-2507"]; v.Mode == wizard.ModeAllGPU || v.Mode == wizard.ModeTiered || v.Mode == wizard.ModeCPUOnly || v.TooBig || v.Speed != SpeedFast {
		t.Errorf("qwen3-30b: %+v", v)
	}
	if v := verdicts["qwen3-235b-a22b-2507"]; v.Mode != wizard.ModeTiered || v.Speed == SpeedFast || v.Speed == SpeedUsable {
		t.Errorf("qwen3-235b: %+v", v)
	}
	if v := verdicts["glm-4.5-air"]; v.Supported || !strings.Contains(v.Reason, "cannot run glm4moe") {
		t.Errorf("glm-4.5-air: %+v", v)
	}
	// Bigger never reads faster: the estimates fall with the per-token bytes.
	if verdicts["qwen3-30b-a3b-2507"].TokensSec <= verdicts["qwen3-235b-a22b-2507"].TokensSec {
		t.Errorf("estimates: 30b %.1f tokens/s, 235b %.1f", verdicts["qwen3-30b-a3b-2507"].TokensSec, verdicts["qwen3-235b-a22b-2507"].TokensSec)
	}
	// An 8 GB laptop without an NVIDIA card: the largest model is too big.
	small := wizard.Hardware{RAMTotal: 8 << 30, RAMAvailable: 6 << 30, PhysicalCores: 4, Drive: platform.DriveSATASSD, DriveMBps: 500}
	if v := Judge(small, ids["qwen3-235b-a22b-2507"]); v.Mode != wizard.ModeCPUOnly || !v.TooBig || v.Words != "Too big for this PC" {
		t.Errorf("235b on a small laptop: %+v", v)
	}
}
