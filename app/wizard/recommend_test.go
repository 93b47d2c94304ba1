package wizard

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"strata/engine"
	"strata/platform"
)

func gb(x float64) int64 { return int64(x * float64(gib)) }

// Realistic models: the sizes of the common GGUF quantisations, the real layer and expert
// counts, and the real KV shapes (GLM-4.5-Air's is left to the estimate).
func qwen3_30b() Model {
	return Model{Name: "Qwen3-30B-A3B Q4_K_M", FileBytes: gb(17.3), ExpertBytes: gb(16), NonExpertBytes: gb(1.3),
		Layers: 48, Experts: 128, ExpertsUsed: 8, ContextLength: 40960, KVBytesPerToken: 48 * 4 * 128 * 2 * 2}
}

func qwen3next_80b() Model { // only 12 of its 48 layers have a KV cache
	return Model{Name: "Qwen3-Next-80B-A3B Q4_K_M", FileBytes: gb(45), ExpertBytes: gb(42.5), NonExpertBytes: gb(2.5),
		Layers: 48, Experts: 512, ExpertsUsed: 10, ContextLength: 262144, KVBytesPerToken: 12 * 2 * 256 * 2 * 2}
}

func gptoss_120b() Model {
	return Model{Name: "gpt-oss-120b MXFP4", FileBytes: gb(61), ExpertBytes: gb(57.5), NonExpertBytes: gb(3.5),
		Layers: 36, Experts: 128, ExpertsUsed: 4, ContextLength: 131072, KVBytesPerToken: 36 * 8 * 64 * 2 * 2}
}

func qwen3_235b() Model {
	return Model{Name: "Qwen3-235B-A22B Q4_K_M", FileBytes: gb(133), ExpertBytes: gb(126), NonExpertBytes: gb(7),
		Layers: 94, Experts: 128, ExpertsUsed: 8, ContextLength: 40960, KVBytesPerToken: 94 * 4 * 128 * 2 * 2}
}

func glm45air() Model {
	return Model{Name: "GLM-4.5-Air Q4_K_M", FileBytes: gb(68), ExpertBytes: gb(63.5), NonExpertBytes: gb(4.5),
		Layers: 46, Experts: 128, ExpertsUsed: 8, ContextLength: 131072}
}

func rtx4080super() GPU {
	return GPU{Name: "NVIDIA GeForce RTX 4080 SUPER", VRAMTotal: gb(15.99), VRAMFree: gb(15.2), Display: true, PCIeGen: 4, PCIeWidth: 16}
}

func rtx5090() GPU {
	return GPU{Name: "NVIDIA GeForce RTX 5090", VRAMTotal: gb(31.84), VRAMFree: gb(30.9), Display: true, PCIeGen: 5, PCIeWidth: 16}
}

func rtx3060() GPU {
	return GPU{Name: "NVIDIA GeForce RTX 3060", VRAMTotal: gb(12), VRAMFree: gb(11.3), Display: true, PCIeGen: 4, PCIeWidth: 16}
}

func rtx4060laptop() GPU { // the laptop's screen hangs off the integrated GPU
	return GPU{Name: "NVIDIA GeForce RTX 4060 Laptop GPU", VRAMTotal: gb(8), VRAMFree: gb(7.6), PCIeGen: 4, PCIeWidth: 8}
}

func rtx3090(i int, display bool, free float64) GPU {
	return GPU{Index: i, Name: "NVIDIA GeForce RTX 3090", VRAMTotal: gb(24), VRAMFree: gb(free), Display: display, PCIeGen: 4, PCIeWidth: 8}
}

func desktop(ramTotal, ramAvail float64, gpus ...GPU) Hardware {
	return Hardware{RAMTotal: gb(ramTotal), RAMAvailable: gb(ramAvail), PhysicalCores: 8, GPUs: gpus,
		Drive: platform.DriveNVMe, DriveMBps: 3500}
}

func withDrive(hw Hardware, c platform.DriveClass, mbps float64) Hardware {
	hw.Drive, hw.DriveMBps = c, mbps
	return hw
}

func inWSL2(hw Hardware) Hardware {
	hw.WSL2, hw.PinnedBudget = true, platform.WSLPinnedBudgetBytes
	return hw
}

// want is what a case asserts. The slot counts follow from the sizing rules in recommend.go:
// slots = (min(total - reserve, free - 256 MiB) - non-expert - KV for 8192 tokens - 768 MiB)
// / ceil(expert bytes / experts); they were checked by hand (see the 80B case).
type want struct {
	mode        Mode
	mainGPU     int
	slots       int
	helpers     []int
	hostReserve float64 // GiB
	hostBudget  float64 // GiB, Budget.HostBudget
	cfgHost     float64 // Config.HostBudgetGiB (tiered: the pinned tier)
	cfgResident float64 // Config.ResidentBudgetGiB
	vramReserve int     // MiB
	context     int
	kv          string   // Config.KVType; "" = f16
	warnings    []string // each must appear in some warning
	noWarnings  bool
	reasons     []string // each must appear in some reason
}

func TestRecommend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hw    Hardware
		model Model
		want  want
	}{
		{
			// A hybrid, 24 KiB of KV a token: 14.95 GiB budget - 2.5 non-expert - 0.75 = 11.7 GiB
			// of room, a quarter (2.9 GiB) holds 65536 f16 tokens (1.5 GiB); the 10.2 GiB left /
			// 1856854 B = 5898 slots.
			name: "32 GB + RTX 4080 SUPER + 80B-A3B is tiered", hw: desktop(32, 27, rtx4080super()), model: qwen3next_80b(),
			want: want{mode: ModeTiered, slots: 5898, hostReserve: 6, hostBudget: 21, cfgHost: 21, vramReserve: 1024, context: 65536,
				noWarnings: true, reasons: []string{"Tiered:", "5898 most-used of 24576", "11.3 GiB are read from the drive",
					"Context: 65536 tokens with the f16 KV cache in VRAM (1.5 GiB), within the 2.9 GiB kept for it (a quarter of the 11.7 GiB the card has beside the non-expert weights",
					"the int8 KV cache (settings) would allow 131072 tokens; it costs about 867 expert slots."}},
		},
		{
			// A 16 GB card: a quarter of its 12.9 GiB room holds 32768 f16 tokens (3.0 GiB), long
			// enough, so f16 stays; the model's limit, 40960, would need int8.
			name: "32 GB + RTX 4080 SUPER + 30B-A3B: the experts the card does not hold fit in RAM", hw: desktop(32, 27, rtx4080super()), model: qwen3_30b(),
			want: want{mode: ModeResident, slots: 3801, hostReserve: 6, hostBudget: 21, cfgResident: 21, vramReserve: 1024, context: 32768, noWarnings: true,
				reasons: []string{"Context: 32768 tokens with the f16 KV cache in VRAM (3.0 GiB), within the 3.2 GiB kept for it", "the int8 KV cache (settings) would allow 40960 tokens; it costs about 1151 expert slots."}},
		},
		{
			name: "32 GB + RTX 4080 SUPER + GLM-4.5-Air (KV estimated)", hw: desktop(32, 27, rtx4080super()), model: glm45air(),
			want: want{mode: ModeTiered, slots: 749, hostReserve: 6, hostBudget: 21, cfgHost: 21, vramReserve: 1024, context: 32768, kv: "int8"},
		},
		{
			// The hybrid's small cache: its whole 262144-token context fits in f16.
			name: "128 GB + RTX 5090 + 80B-A3B: resident", hw: desktop(128, 120, rtx5090()), model: qwen3next_80b(),
			want: want{mode: ModeResident, slots: 12374, hostReserve: 8, hostBudget: 112, cfgResident: 112, vramReserve: 1024, context: 262144, noWarnings: true,
				reasons: []string{"Context: 262144 tokens, the model's limit, with the f16 KV cache in VRAM (6.0 GiB)", "it costs about 3469 expert slots."}},
		},
		{
			name: "128 GB + RTX 5090 + 235B-A22B: resident", hw: desktop(128, 120, rtx5090()), model: qwen3_235b(),
			want: want{mode: ModeResident, slots: 1792, hostReserve: 8, hostBudget: 112, cfgResident: 112, vramReserve: 1024, context: 40960, kv: "int8",
				noWarnings: true, reasons: []string{"Resident:", "107.2 GiB fit"}},
		},
		{
			name: "128 GB + RTX 5090 + 30B-A3B: all on the GPU", hw: desktop(128, 120, rtx5090()), model: qwen3_30b(),
			want: want{mode: ModeAllGPU, slots: 6144, hostReserve: 8, hostBudget: 112, vramReserve: 1024, context: 40960, noWarnings: true,
				reasons: []string{"All on the GPU", "Context: 40960 tokens, the model's limit, with the f16 KV cache in VRAM (3.8 GiB), within the 12.6 GiB kept for it (what the card has left beside the whole model"}},
		},
		{
			// A 12 GB card: a quarter of its 9.0 GiB room (2.2 GiB) holds only 16384 f16 tokens,
			// but the model's limit, 40960, at int8 (2.1 GiB).
			name: "64 GB + RTX 3060 12 GB + 30B-A3B", hw: desktop(64, 56, rtx3060()), model: qwen3_30b(),
			want: want{mode: ModeResident, slots: 2626, hostReserve: 8, hostBudget: 48, cfgResident: 48, vramReserve: 1024, context: 40960, kv: "int8", noWarnings: true,
				reasons: []string{"Context: 40960 tokens, the model's limit, with the int8 KV cache in VRAM (2.1 GiB): with f16 only 16384 tokens would fit in the 2.2 GiB kept for it", "nearly halving the cache for a small error; it costs about 809 expert slots."}},
		},
		{
			name: "64 GB + RTX 3060 + 120B on NVMe: tiered", hw: desktop(64, 56, rtx3060()), model: gptoss_120b(),
			want: want{mode: ModeTiered, slots: 439, hostReserve: 8, hostBudget: 48, cfgHost: 48, vramReserve: 1024, context: 32768, kv: "int8", noWarnings: true},
		},
		{
			// The same machine with the model on a SATA SSD: 52.0 GiB of experts fit in RAM once
			// the reserve drops to 4 GiB, which beats reading 2 GiB per pass from the drive.
			name: "slow SATA drive prefers RAM over cold reads and warns", hw: withDrive(desktop(64, 58, rtx3060()), platform.DriveSATASSD, 520), model: gptoss_120b(),
			want: want{mode: ModeResident, slots: 439, hostReserve: 4, hostBudget: 54, cfgResident: 54, vramReserve: 1024, context: 32768, kv: "int8",
				warnings: []string{"Only 4.0 GiB of RAM is left for other programs", "a SATA SSD, 520 MB/s", "about 3 minutes"},
				reasons:  []string{"because the model's drive is slow"}},
		},
		{
			name: "hard disk that cannot be avoided: tiered with a warning", hw: withDrive(desktop(32, 27, rtx4080super()), platform.DriveSlow, 160), model: qwen3next_80b(),
			want: want{mode: ModeTiered, slots: 5898, hostReserve: 6, hostBudget: 21, cfgHost: 21, vramReserve: 1024, context: 65536,
				warnings: []string{"11.3 GiB of experts will be read from a slow drive (a hard disk or similar, 160 MB/s)", "about 6 minutes"}},
		},
		{
			name: "drive speed unknown: tiered warns", hw: withDrive(desktop(32, 27, rtx4080super()), platform.DriveUnknown, 0), model: qwen3next_80b(),
			want: want{mode: ModeTiered, slots: 5898, hostReserve: 6, hostBudget: 21, cfgHost: 21, vramReserve: 1024, context: 65536,
				warnings: []string{"its speed is unknown"}},
		},
		{
			name: "16 GB laptop + 8 GB GPU + 30B-A3B", hw: desktop(15.7, 11, rtx4060laptop()), model: qwen3_30b(),
			want: want{mode: ModeTiered, slots: 1711, hostReserve: 3, hostBudget: 8, cfgHost: 8, vramReserve: 256, context: 16384, kv: "int8", noWarnings: true,
				reasons: []string{"Context: 16384 tokens with the int8 KV cache in VRAM (864 MiB): with f16 only 8192 tokens would fit in the 1.3 GiB kept for it (a quarter of the 5.3 GiB", "it costs about 323 expert slots."}},
		},
		{
			name: "16 GB laptop + 8 GB GPU + 80B-A3B", hw: desktop(15.7, 11, rtx4060laptop()), model: qwen3next_80b(),
			want: want{mode: ModeTiered, slots: 1937, hostReserve: 3, hostBudget: 8, cfgHost: 8, vramReserve: 256, context: 32768, noWarnings: true},
		},
		{
			name: "no NVIDIA GPU: cpu-only, model fits in RAM", hw: desktop(32, 27), model: qwen3_30b(),
			// 21 GiB for Strata - 17.3 of model leave 3.7 GiB for the cache: 32768 f16 tokens (3 GiB).
			want: want{mode: ModeCPUOnly, mainGPU: -1, hostReserve: 6, hostBudget: 21, vramReserve: 1024, context: 32768, noWarnings: true,
				reasons: []string{"CPU only: no NVIDIA GPU was found", "it fits in RAM", "Context: 32768 tokens with the f16 KV cache (3.0 GiB)", "beside the whole model", "the int8 KV cache (settings) would allow 40960 tokens"}},
		},
		{
			// 8 GiB for Strata, the model does not fit: a quarter, 2 GiB, holds 16384 f16 tokens
			// (1.5 GiB) or 32768 int8 ones (1.7 GiB): int8.
			name: "no NVIDIA GPU, 16 GB laptop: the int8 cache doubles the context", hw: desktop(15.7, 11), model: qwen3_30b(),
			want: want{mode: ModeCPUOnly, mainGPU: -1, hostReserve: 3, hostBudget: 8, vramReserve: 1024, context: 32768, kv: "int8",
				warnings: []string{"larger than the 8.0 GiB"},
				reasons:  []string{"Context: 32768 tokens with the int8 KV cache (1.7 GiB): with f16 only 16384 tokens would fit in the 2.0 GiB kept for it (a quarter of the 8.0 GiB of RAM Strata may use)"}},
		},
		{
			name: "no NVIDIA GPU: cpu-only, 235B does not fit", hw: desktop(64, 58), model: qwen3_235b(),
			want: want{mode: ModeCPUOnly, mainGPU: -1, hostReserve: 8, hostBudget: 50, vramReserve: 1024, context: 40960,
				warnings: []string{"The model (133.0 GiB) is larger than the 50.0 GiB"}, reasons: []string{"Context: 40960 tokens, the model's limit, with the f16 KV cache (7.3 GiB)"}},
		},
		{
			name: "a 2 GB card cannot hold the non-expert weights: cpu-only",
			hw:   desktop(64, 58, GPU{Name: "NVIDIA GeForce GT 1030", VRAMTotal: gb(2), VRAMFree: gb(1.7), Display: true}), model: qwen3_235b(),
			want: want{mode: ModeCPUOnly, mainGPU: -1, hostReserve: 8, hostBudget: 50, vramReserve: 1024, context: 40960,
				warnings: []string{"larger than the 50.0 GiB"}, reasons: []string{"the largest GPU, NVIDIA GeForce GT 1030, has 1.0 GiB for Strata"}},
		},
		{
			// The headless card 1 has the most room and becomes the main GPU; 2 (headless) and
			// 0 (the display) help, and with their slots the rest of the experts fit in RAM:
			// resident, and the words say what each helper holds.
			name: "WSL2 with three GPUs + 235B-A22B",
			hw:   inWSL2(desktop(96, 90, rtx3090(0, true, 23.3), rtx3090(1, false, 23.6), rtx3090(2, false, 23.6))), model: qwen3_235b(),
			want: want{mode: ModeResident, mainGPU: 1, slots: 1174, helpers: []int{2181, 2148}, hostReserve: 8, hostBudget: 82, cfgResident: 82,
				vramReserve: 256, context: 32768, kv: "int8",
				reasons: []string{"Running under WSL2", "with 2 helper GPUs holds the 5503 most-used", "Helper GPU 1, the NVIDIA GeForce RTX 3090 (GPU 2), has room for 2181 more experts"}},
		},
		{
			name: "WSL2 tiered: the pinned tier shrinks to the driver's budget", hw: inWSL2(desktop(32, 28, rtx4080super())), model: qwen3next_80b(),
			want: want{mode: ModeTiered, slots: 5898, hostReserve: 6, hostBudget: 22, cfgHost: 0.7, vramReserve: 1024, context: 65536,
				warnings: []string{"Under WSL2 the pinned RAM tier is limited to 768 MiB"}},
		},
		{
			name: "235B-A22B tiered on 32 GB + RTX 4080 SUPER", hw: desktop(32, 27, rtx4080super()), model: qwen3_235b(),
			want: want{mode: ModeTiered, slots: 529, hostReserve: 6, hostBudget: 21, cfgHost: 21, vramReserve: 1024, context: 16384, kv: "int8"},
		},
		{
			name: "a Pascal card is too old for the kernels: cpu-only",
			hw:   desktop(64, 58, GPU{Name: "NVIDIA GeForce GTX 1080 Ti", VRAMTotal: gb(11), VRAMFree: gb(10.5), Display: true, ComputeMajor: 6, ComputeMinor: 1}), model: qwen3_30b(),
			want: want{mode: ModeCPUOnly, mainGPU: -1, hostReserve: 8, hostBudget: 50, vramReserve: 1024, context: 40960, noWarnings: true,
				reasons: []string{"too old for Strata's GPU code (compute capability 6.1; 7.5 or newer is needed)"}},
		},
		{
			// The GTX 1070 is skipped; the RTX 2060 helps with (5.55 GiB - 512 MiB) / 12.8 MiB
			// = 404 experts, which lets the rest fit in RAM: resident.
			name: "an old second card is not used as a helper",
			hw: desktop(64, 56, rtx3060(), GPU{Index: 1, Name: "NVIDIA GeForce GTX 1070", VRAMTotal: gb(8), VRAMFree: gb(7.8), ComputeMajor: 6, ComputeMinor: 1},
				GPU{Index: 2, Name: "NVIDIA GeForce RTX 2060", VRAMTotal: gb(6), VRAMFree: gb(5.8), ComputeMajor: 7, ComputeMinor: 5}), model: gptoss_120b(),
			want: want{mode: ModeResident, mainGPU: 0, slots: 439, helpers: []int{404}, hostReserve: 8, hostBudget: 48, cfgResident: 48, vramReserve: 1024, context: 32768, kv: "int8",
				noWarnings: true, reasons: []string{"Helper GPU 1, the NVIDIA GeForce RTX 2060 (GPU 2), has room for 404 more experts"}},
		},
		{
			name: "WSL2 with the model on /mnt/c warns",
			hw:   func() Hardware { h := inWSL2(desktop(64, 58, rtx5090())); h.DriveFS = "9p"; return h }(), model: qwen3_30b(),
			want: want{mode: ModeAllGPU, slots: 6144, hostReserve: 8, hostBudget: 50, vramReserve: 1024, context: 40960,
				warnings: []string{"copy it into the Linux filesystem"}},
		},
		{
			name: "120B all on an H200", hw: desktop(128, 120, GPU{Name: "NVIDIA H200", VRAMTotal: gb(139.8), VRAMFree: gb(139.2)}), model: gptoss_120b(),
			want: want{mode: ModeAllGPU, slots: 4608, hostReserve: 8, hostBudget: 112, vramReserve: 256, context: 131072, noWarnings: true},
		},
		{
			// A 24 GB card: the 5.0 GiB its 21.0 GiB of room leaves beside every expert holds the
			// model's limit in f16 (3.8 GiB), so no slot is lost.
			name: "24 GB card + 30B-A3B: the model's limit in f16, all on the GPU", hw: desktop(32, 27, rtx3090(0, true, 23.3)), model: qwen3_30b(),
			want: want{mode: ModeAllGPU, slots: 6144, hostReserve: 6, hostBudget: 21, vramReserve: 1024, context: 40960, noWarnings: true,
				reasons: []string{"Context: 40960 tokens, the model's limit, with the f16 KV cache in VRAM (3.8 GiB), within the 5.0 GiB kept for it (what the card has left beside the whole model"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Recommend(tc.hw, tc.model)
			w := tc.want
			b := r.Budget
			c := r.Config
			check := func(what string, got, want any) {
				t.Helper()
				if got != want {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("mode", r.Mode, w.mode)
			check("main GPU", b.MainGPU, w.mainGPU)
			check("slots", b.ExpertSlots, w.slots)
			check("config expert cache", c.ExpertCache, w.slots)
			check("helpers", len(b.HelperSlots), len(w.helpers))
			for i := range w.helpers {
				if i < len(b.HelperSlots) {
					check("helper slots", b.HelperSlots[i], w.helpers[i])
				}
			}
			// The Config takes the helpers' slots.
			wantDevice := func(i int) int {
				if i >= len(w.helpers) {
					return 0
				}
				return w.helpers[i]
			}
			check("device1", c.ExpertCacheDevice1, wantDevice(0))
			check("device2", c.ExpertCacheDevice2, wantDevice(1))
			check("host reserve", gibs(b.HostReserve), w.hostReserve)
			check("config host reserve", c.HostReserveGiB, w.hostReserve)
			check("host budget", gibs(b.HostBudget), w.hostBudget)
			check("config host budget", c.HostBudgetGiB, w.cfgHost)
			check("config resident budget", c.ResidentBudgetGiB, w.cfgResident)
			check("config vram reserve", c.VRAMReserveMiB, w.vramReserve)
			check("context", c.MaxContext, w.context)
			wantKV := w.kv
			if wantKV == "" {
				wantKV = "f16"
			}
			check("kv type", c.KVType, wantKV)
			check("budget kv type", b.KVType, wantKV)
			check("tiered flag", c.TieredExperts, w.mode == ModeTiered)
			check("resident flag", c.ResidentExperts, w.mode == ModeResident)
			check("backend", c.Backend, map[bool]string{true: "cpu", false: "cuda"}[w.mode == ModeCPUOnly])
			check("wsl2", r.WSL2, tc.hw.WSL2)
			check("wsl2 adjustments", len(r.WSL2Adjustments) > 0, tc.hw.WSL2 && w.mode != ModeCPUOnly)
			check("wsl2 words on helpers", strings.Contains(strings.Join(r.WSL2Adjustments, "\n"), "helper GPUs' staging buffers and result rows"), tc.hw.WSL2 && len(w.helpers) > 0)
			// The resident reason says the GPU reads part of the arena over PCIe, except under
			// WSL2, where the reads are off.
			check("resident reason names PCIe reads", strings.Contains(strings.Join(r.Reasons, "\n"), "over PCIe"), w.mode == ModeResident && !tc.hw.WSL2)
			if tc.hw.WSL2 && w.mode != ModeCPUOnly {
				check("pcie share under WSL2", c.PCIeFrac, 0.0)
				check("pinned budget under WSL2", c.PinnedBudgetMiB, int(tc.hw.PinnedBudget>>20))
				if r.Mode == ModeTiered {
					// The pinned tier and the staging ring fit the budget the engine enforces.
					check("pinned tier within the budget", r.Budget.PinnedTier+wslStaging <= tc.hw.PinnedBudget, true)
				}
			} else {
				check("pinned budget outside WSL2", c.PinnedBudgetMiB, 0)
			}
			if err := c.Check(); err != nil {
				t.Errorf("engine.Open would refuse the config: %v", err)
			}

			// Memory adds up: the main GPU's plan stays inside its budget, the RAM plan
			// inside the RAM.
			if w.mode != ModeCPUOnly {
				used := b.NonExpertBytes + b.KVBytes + b.OverheadBytes + int64(b.ExpertSlots)*b.BytesPerExpert
				if used > b.VRAMBudget {
					t.Errorf("VRAM plan %d > budget %d", used, b.VRAMBudget)
				}
			}
			if b.HostBudget+b.HostReserve > max(tc.hw.RAMAvailable, 1) {
				t.Errorf("host budget %d + reserve %d > available %d", b.HostBudget, b.HostReserve, tc.hw.RAMAvailable)
			}
			if w.mode == ModeResident && b.ComplementBytes > b.HostBudget {
				t.Errorf("resident but complement %d > host budget %d", b.ComplementBytes, b.HostBudget)
			}
			if w.mode == ModeTiered && b.ComplementBytes <= b.HostBudget {
				t.Errorf("tiered but complement %d fits in host budget %d", b.ComplementBytes, b.HostBudget)
			}

			if len(r.Reasons) == 0 || !strings.HasSuffix(r.Reasons[0], ".") || strings.Count(r.Reasons[0], ". ") > 0 {
				t.Errorf("first reason is not one sentence: %q", r.Reasons)
			}
			all := strings.Join(r.Reasons, "\n")
			for _, s := range w.reasons {
				if !strings.Contains(all, s) {
					t.Errorf("no reason mentions %q:\n%s", s, all)
				}
			}
			warns := strings.Join(r.Warnings, "\n")
			for _, s := range w.warnings {
				if !strings.Contains(warns, s) {
					t.Errorf("no warning mentions %q:\n%s", s, warns)
				}
			}
			if w.noWarnings && len(r.Warnings) > 0 {
				t.Errorf("unexpected warnings: %q", r.Warnings)
			}
		})
	}
}

// More VRAM or more RAM never makes the plan worse.
func TestRecommendIsMonotonic(t *testing.T) {
	rank := map[Mode]int{ModeCPUOnly: 0, ModeTiered: 1, ModeResident: 2, ModeAllGPU: 3}
	for _, m := range []Model{qwen3_30b(), qwen3next_80b(), gptoss_120b(), qwen3_235b(), glm45air()} {
		prev := Recommend(desktop(16, 12, rtx3060()), m)
		for _, ram := range []float64{24, 32, 48, 64, 96, 128, 192, 256} {
			r := Recommend(desktop(ram, ram-6, rtx3060()), m)
			if rank[r.Mode] < rank[prev.Mode] || r.Budget.ExpertSlots != prev.Budget.ExpertSlots {
				t.Errorf("%s: %g GB RAM gives %s/%d after %s/%d", m.Name, ram, r.Mode, r.Budget.ExpertSlots, prev.Mode, prev.Budget.ExpertSlots)
			}
			prev = r
		}
		prevSlots := -1
		for _, vram := range []float64{6, 8, 12, 16, 24, 32, 48, 80} {
			r := Recommend(desktop(64, 58, GPU{Name: "card", VRAMTotal: gb(vram), VRAMFree: gb(vram - 0.5), Display: true}), m)
			if r.Budget.ExpertSlots < prevSlots {
				t.Errorf("%s: %g GB VRAM gives %d slots after %d", m.Name, vram, r.Budget.ExpertSlots, prevSlots)
			}
			prevSlots = r.Budget.ExpertSlots
		}
	}
}

// Bad or missing model facts give an answer with a warning, never a panic or a division by 0.
func TestRecommendIncompleteModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Model
		warn string
	}{
		{"nothing known", Model{}, "expert sizes are unknown"},
		{"only the file size", Model{FileBytes: gb(5)}, "expert sizes are unknown"},
		{"experts without counts", Model{FileBytes: gb(17.3), ExpertBytes: gb(16), NonExpertBytes: gb(1.3)}, "expert count is unknown"},
		{"negative sizes", Model{FileBytes: -1, ExpertBytes: -5, NonExpertBytes: -5, Layers: -1, Experts: -1, ContextLength: -1}, "expert sizes are unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, hw := range []Hardware{desktop(32, 27, rtx4080super()), desktop(32, 27), {}} {
				r := Recommend(hw, tc.m)
				if r.Mode == "" || len(r.Reasons) == 0 {
					t.Errorf("no decision: %+v", r)
				}
				if !strings.Contains(strings.Join(r.Warnings, " "), tc.warn) {
					t.Errorf("warnings %q lack %q", r.Warnings, tc.warn)
				}
				if err := r.Config.Validate(); err != nil {
					t.Errorf("config: %v", err)
				}
			}
		})
	}
}

// Whatever the machine and the model, the answer is a valid config whose plan fits the
// memory it claims, and never a panic.
func TestRecommendRandomMachines(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	models := []Model{qwen3_30b(), qwen3next_80b(), gptoss_120b(), qwen3_235b(), glm45air()}
	classes := []platform.DriveClass{platform.DriveNVMe, platform.DriveSATASSD, platform.DriveSlow, platform.DriveUnknown}
	for i := 0; i < 3000; i++ {
		hw := Hardware{RAMTotal: gb(4 + 512*rng.Float64()), WSL2: rng.IntN(4) == 0, Drive: classes[rng.IntN(len(classes))]}
		hw.RAMAvailable = int64(float64(hw.RAMTotal) * rng.Float64())
		for g := range rng.IntN(4) {
			total := gb(2 + 140*rng.Float64())
			hw.GPUs = append(hw.GPUs, GPU{Index: g, Name: "card", VRAMTotal: total, VRAMFree: int64(float64(total) * rng.Float64()),
				Display: rng.IntN(2) == 0, ComputeMajor: rng.IntN(11)})
		}
		m := models[rng.IntN(len(models))]
		r := Recommend(hw, m)
		if err := r.Config.Check(); err != nil {
			t.Fatalf("case %d: engine.Open would refuse the config: %v\n%+v", i, err, hw)
		}
		b := r.Budget
		if r.Mode != ModeCPUOnly {
			used := b.NonExpertBytes + b.KVBytes + b.OverheadBytes + int64(b.ExpertSlots)*b.BytesPerExpert
			if used > b.VRAMBudget || b.ExpertSlots < 0 || b.ExpertSlots > b.TotalExperts {
				t.Fatalf("case %d: VRAM plan %d over budget %d (%d slots)\n%+v", i, used, b.VRAMBudget, b.ExpertSlots, hw)
			}
		}
		held := b.ExpertSlots
		for _, s := range b.HelperSlots {
			held += s
		}
		if held > b.TotalExperts || len(b.HelperSlots) > 2 {
			t.Fatalf("case %d: %d experts held of %d, helpers %v", i, held, b.TotalExperts, b.HelperSlots)
		}
		if len(r.Reasons) == 0 || r.Mode == "" {
			t.Fatalf("case %d: no decision", i)
		}
	}
}

// TestRecommendGptOssOnTheGPU: gpt-oss, whose expert biases travel with the GPU's tiers (VRAM
// slots, the streaming ring, PCIe reads of pinned experts), gets a GPU mode on a machine with
// a GPU, the same as a qwen3moe model of its size, and the Config passes Open's knob check;
// a model the GPU cannot run (a hybrid's Gated DeltaNet layers) still gets the CPU, with the
// reason said.
func TestRecommendGptOssOnTheGPU(t *testing.T) {
	info := engine.ModelInfo{Architecture: "gpt-oss", FileBytes: gb(12.1), ExpertBytes: gb(10.9), NonExpertBytes: gb(1.2),
		Layers: 24, Experts: 32, ExpertsUsed: 4, KVHeads: 8, HeadDim: 64, ContextLength: 131072, RingLayers: 12, RingKeep: 639}
	m := ModelFromInfo(info)
	if m.GPULacks != "" {
		t.Fatalf("gpt-oss: GPULacks %q", m.GPULacks)
	}
	if want := int64(12 * 8 * 64 * 4); m.KVBytesPerToken != want {
		t.Errorf("KV per token %d, want %d (the full layers only)", m.KVBytesPerToken, want)
	}
	qi := info
	qi.Architecture, qi.RingLayers = "qwen3moe", 0
	for _, hw := range []Hardware{desktop(32, 27, rtx5090()), desktop(32, 27, rtx4080super()), desktop(15.7, 11, rtx4060laptop())} {
		r := Recommend(hw, m)
		if r.Mode == ModeCPUOnly || r.Config.Backend != "cuda" {
			t.Errorf("%s: mode %s backend %s, want a GPU mode", hw.GPUs[0].Name, r.Mode, r.Config.Backend)
		}
		if err := r.Config.Check(); err != nil {
			t.Errorf("%s: the recommended Config fails Open's check: %v", hw.GPUs[0].Name, err)
		}
		if q := Recommend(hw, ModelFromInfo(qi)); q.Mode == ModeCPUOnly {
			t.Errorf("%s: a qwen3moe model of the same size was kept off the GPU", hw.GPUs[0].Name)
		}
	}
	// A second card with room: helper slots for qwen3moe and for gpt-oss (its expert biases
	// travel to the helper's slots too).
	two := desktop(32, 27, rtx3060(), GPU{Index: 1, Name: "NVIDIA GeForce RTX 2060", VRAMTotal: gb(6), VRAMFree: gb(5.8), ComputeMajor: 7, ComputeMinor: 5})
	if q := Recommend(two, ModelFromInfo(qi)); q.Config.ExpertCacheDevice1 == 0 {
		t.Errorf("qwen3moe on an RTX 3060 and an RTX 2060: no helper slots (%q)", q.Reasons)
	}
	g := Recommend(two, m)
	if g.Config.ExpertCacheDevice1 == 0 || len(g.Budget.HelperSlots) == 0 || g.Config.Check() != nil {
		t.Errorf("gpt-oss on an RTX 3060 and an RTX 2060: device1 %d, helper slots %v (check %v), reasons %q", g.Config.ExpertCacheDevice1, g.Budget.HelperSlots, g.Config.Check(), g.Reasons)
	}
	// A hybrid of the published shapes gets the GPU; one whose delta-rule key heads are past
	// the GPU kernels' gets the CPU, with the reason said.
	info.Architecture, info.RecurrentLayers, info.RecurrentBytes = "qwen3next", 18, gb(0.2)
	info.DeltaKeyDim, info.ConvKernel = 128, 4
	if r := Recommend(desktop(32, 27, rtx5090()), ModelFromInfo(info)); r.Mode == ModeCPUOnly || r.Config.Backend != "cuda" || r.Config.Check() != nil {
		t.Errorf("hybrid: mode %s backend %s (check %v), want a GPU mode", r.Mode, r.Config.Backend, r.Config.Check())
	}
	info.DeltaKeyDim = 512
	hm := ModelFromInfo(info)
	if hm.GPULacks == "" {
		t.Fatal("a hybrid with 512-wide key heads: no reason the GPU cannot run it")
	}
	r := Recommend(desktop(32, 27, rtx5090()), hm)
	if r.Mode != ModeCPUOnly || r.Config.Backend != "cpu" || r.Config.ExpertCache != 0 {
		t.Errorf("hybrid: mode %s backend %s expert cache %d, want the CPU", r.Mode, r.Config.Backend, r.Config.ExpertCache)
	}
	if !strings.Contains(strings.Join(r.Reasons, " "), "Gated DeltaNet") {
		t.Errorf("hybrid: reasons %q do not say why", r.Reasons)
	}
}

// TestRecommendHelpersPassOpen: on a machine with a second card with room the wizard's
// Config gives it slots, Open's own knob check takes it, and the words say so plainly.
func TestRecommendHelpersPassOpen(t *testing.T) {
	hw := desktop(64, 56, rtx3090(0, true, 23.3), rtx3090(1, false, 23.6))
	r := Recommend(hw, qwen3_235b())
	b := r.Budget
	if len(b.HelperSlots) == 0 || b.HelperSlots[0] <= 0 {
		t.Fatalf("no helper placed on a second RTX 3090: %+v", b)
	}
	if err := r.Config.Check(); err != nil {
		t.Fatalf("engine.Open would refuse the wizard's config: %v", err)
	}
	all := strings.Join(r.Reasons, "\n")
	if r.Config.ExpertCacheDevice1 != b.HelperSlots[0] {
		t.Errorf("device1 = %d, want the helper's %d slots", r.Config.ExpertCacheDevice1, b.HelperSlots[0])
	}
	if b.GPUHeld() != b.ExpertSlots+b.HelperSlots[0] {
		t.Errorf("GPUHeld = %d, want the main GPU's %d and the helper's %d", b.GPUHeld(), b.ExpertSlots, b.HelperSlots[0])
	}
	if want := fmt.Sprintf("Helper GPU 1, the NVIDIA GeForce RTX 3090 (GPU 0), has room for %d more experts", b.HelperSlots[0]); !strings.Contains(all, want) {
		t.Errorf("no reason says %q:\n%s", want, all)
	}
	if !strings.Contains(all, "with one helper GPU") {
		t.Errorf("the reasons do not say the helper GPU is used:\n%s", all)
	}
}

// TestChooseGPUContext: when a quarter of the room cannot hold the shortest context, the
// cache takes the shortest one that fits in the whole room, f16 first, and says so; when
// none fits the GPU is refused. The 30B-A3B's cache is 96 KiB a token at f16, 54 at int8.
func TestChooseGPUContext(t *testing.T) {
	m, _ := normalize(qwen3_30b())
	for _, tc := range []struct {
		room   int64
		ok     bool
		tokens int
		kv     string
		words  string
	}{
		{room: 600 * mib, ok: true, tokens: 2048, kv: "int8", words: "with f16 no context worth having would fit in the 150 MiB kept for it"},
		{room: 400 * mib, ok: true, tokens: 2048, kv: "f16", words: "the least Strata plans for: a quarter of the 400 MiB"},
		{room: 150 * mib, ok: true, tokens: 2048, kv: "int8", words: "the least Strata plans for"},
		{room: 100 * mib},
		{room: -gib},
	} {
		cc, ok := chooseGPUContext(m, tc.room)
		if ok != tc.ok || cc.tokens != tc.tokens || cc.kvType != tc.kv || !strings.Contains(cc.reason, tc.words) {
			t.Errorf("room %s: %v %d %s %q, want %v %d %s with %q", gibStr(tc.room), ok, cc.tokens, cc.kvType, cc.reason, tc.ok, tc.tokens, tc.kv, tc.words)
		}
		if ok && cc.bytes > tc.room {
			t.Errorf("room %s: cache %s does not fit", gibStr(tc.room), gibStr(cc.bytes))
		}
	}
	// A card with too little room for even that is refused with the numbers.
	r := Recommend(desktop(64, 58, GPU{Name: "small card", VRAMTotal: gb(3.3), VRAMFree: gb(3.2), Display: true}), qwen3_235b())
	if r.Mode != ModeCPUOnly || !strings.Contains(strings.Join(r.Reasons, " "), "the largest GPU, small card, has") {
		t.Errorf("a card without room for the cache: mode %s, reasons %q", r.Mode, r.Reasons)
	}
}
