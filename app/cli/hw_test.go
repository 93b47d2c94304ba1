package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/app/wizard"
	"strata/engine"
	"strata/platform"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// `strata hw` on this machine, with whatever GPU it has (none here), must succeed.
func TestHWOnThisMachine(t *testing.T) {
	code, out, errs := runCLI(t, "hw")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, label := range []string{"System", "CPU", "RAM", "GPU"} {
		if !strings.Contains(out, "\n"+label) && !strings.HasPrefix(out, label) {
			t.Errorf("no %s line in:\n%s", label, out)
		}
	}

	code, out, errs = runCLI(t, "hw", "--json")
	if code != 0 {
		t.Fatalf("--json exit %d: %s", code, errs)
	}
	var rep struct {
		Host           platform.Host          `json:"host"`
		Recommendation *wizard.Recommendation `json:"recommendation"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("more than one JSON value on stdout")
	}
	if rep.Host.CPU.LogicalCores < 1 || rep.Recommendation != nil {
		t.Errorf("got %+v", rep)
	}
	if len(rep.Host.GPUs.Devices) == 0 && rep.Host.GPUs.Reason == "" {
		t.Errorf("no GPU and no reason")
	}
	if !strings.Contains(out, `"devices": [`) {
		t.Errorf("devices is not a JSON list:\n%s", out)
	}
}

func TestHWRefusesBadCalls(t *testing.T) {
	if code, _, errs := runCLI(t, "hw", "--bogus"); code != 2 || !strings.Contains(errs, "usage: strata hw") {
		t.Errorf("bad flag: exit %d, %s", code, errs)
	}
	if code, _, _ := runCLI(t, "hw", "stray"); code != 2 {
		t.Errorf("stray argument: exit %d", code)
	}
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	if code, _, errs := runCLI(t, "hw", "-m", missing); code != 1 || !strings.Contains(errs, "missing.gguf") {
		t.Errorf("missing model: exit %d, %s", code, errs)
	}
}

// fakeHost is a 32 GB PC with an RTX 4080 SUPER: the wizard's decision on it is known.
func fakeHost(context.Context) platform.Host {
	const gib = 1 << 30
	return platform.Host{OS: "windows", Arch: "amd64",
		RAM: platform.Memory{TotalBytes: 32 * gib, AvailableBytes: 27 * gib},
		CPU: platform.CPU{Model: "AMD Ryzen 7 7800X3D 8-Core Processor", PhysicalCores: 8, LogicalCores: 16, AVX2: true, AVX512: true},
		GPUs: platform.GPUs{Driver: "572.16", CUDA: "12.8", Devices: []platform.GPU{{Index: 0, Name: "NVIDIA GeForce RTX 4080 SUPER",
			VRAMTotalBytes: 16 * gib, VRAMFreeBytes: 15 * gib, PCIeGen: 4, PCIeWidth: 16, DisplayActive: true}}},
	}
}

// TestHWWithModel runs `hw -m` with a model description in place of engine.Inspect (the
// model file itself is a small real file, so the drive probe runs for real).
func TestHWWithModel(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // keep the drive-probe cache out of the user's
	t.Setenv("LocalAppData", t.TempDir())
	const gib = 1 << 30
	path := filepath.Join(t.TempDir(), "Qwen3-30B-A3B-Q4_K_M.gguf")
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	info := engine.ModelInfo{Path: path, Name: "Qwen3-30B-A3B", Architecture: "qwen3moe", FileBytes: 173 * gib / 10,
		ExpertBytes: 16 * gib, NonExpertBytes: 13 * gib / 10, Layers: 48, Experts: 128, ExpertsUsed: 8, ContextLength: 40960}
	deps := hwDeps{probe: fakeHost, probeDrive: platform.ProbeDrive,
		inspect: func(_ context.Context, p string) (engine.ModelInfo, error) {
			if p != path {
				t.Errorf("inspect(%q)", p)
			}
			return info, nil
		}}

	var out bytes.Buffer
	if err := hw(context.Background(), []string{"-m", path, "--json"}, IO{Out: &out, Err: &out}, deps); err != nil {
		t.Fatal(err)
	}
	var rep hwReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	r := rep.Recommendation
	if r == nil || rep.Model == nil || rep.Drive == nil {
		t.Fatalf("incomplete report:\n%s", out.String())
	}
	// The experts the card does not hold fit in the 21 GiB left of 27 GiB available: resident; the card
	// has 15 GiB free - 256 MiB margin - 1.3 non-expert - 0.75 working = 12.7 GiB of room, a
	// quarter of which holds 32768 f16 tokens of cache (3 GiB); the other 9.7 GiB / 2796203 B
	// = 3724 experts.
	if r.Mode != wizard.ModeResident || !r.Config.ResidentExperts || r.Config.ExpertCache != 3724 || r.Config.Backend != "cuda" {
		t.Errorf("mode %s, expert cache %d, backend %s", r.Mode, r.Config.ExpertCache, r.Config.Backend)
	}
	if rep.Drive.Read.Bytes != 1<<20 || rep.Drive.Path != path {
		t.Errorf("drive: %+v", rep.Drive)
	}
	flags := strings.Join(rep.Flags, " ")
	for _, f := range []string{"--backend=cuda", "--expert-cache=3724", "--max-context=32768", "--host-reserve-gib=6", "--resident-experts"} {
		if !strings.Contains(flags, f) {
			t.Errorf("flags %q lack %s", flags, f)
		}
	}

	out.Reset()
	if err := hw(context.Background(), []string{"-m", path}, IO{Out: &out, Err: &out}, deps); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"GPU 0     NVIDIA GeForce RTX 4080 SUPER", "Model     Qwen3-30B-A3B", "Mode      resident", "Resident:", "Flags     --backend=cuda"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("no %q in:\n%s", s, out.String())
		}
	}
}

func TestConfigFlags(t *testing.T) {
	if f := configFlags(engine.DefaultConfig()); len(f) != 0 {
		t.Errorf("defaults give flags %q", f)
	}
	c := engine.DefaultConfig()
	c.Backend, c.TieredExperts, c.HostBudgetGiB, c.ExpertCache, c.ExpertCacheDevice1 = "cuda", true, 21, 6657, 300
	got := strings.Join(configFlags(c), " ")
	for _, f := range []string{"--backend=cuda", "--tiered-experts", "--host-budget-gib=21", "--expert-cache=6657", "--expert-cache-device1=300"} {
		if !strings.Contains(got, f) {
			t.Errorf("%q lacks %s", got, f)
		}
	}
	if strings.Contains(got, "resident") {
		t.Errorf("unchanged knobs in %q", got)
	}
}

// TestHWRecommendsAHelper: with a second card that has room, `strata hw -m` says in plain
// words that it helps and how many experts it holds, and the flags give it its slots.
func TestHWRecommendsAHelper(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("LocalAppData", t.TempDir())
	const gib = 1 << 30
	path := filepath.Join(t.TempDir(), "Qwen3-235B-A22B-Q4_K_M.gguf")
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	info := engine.ModelInfo{Path: path, Name: "Qwen3-235B-A22B", Architecture: "qwen3moe", FileBytes: 133 * gib,
		ExpertBytes: 126 * gib, NonExpertBytes: 7 * gib, Layers: 94, Experts: 128, ExpertsUsed: 8, ContextLength: 40960, KVHeads: 4, HeadDim: 128}
	host := func(ctx context.Context) platform.Host {
		h := fakeHost(ctx)
		h.GPUs.Devices = append(h.GPUs.Devices, platform.GPU{Index: 1, Name: "NVIDIA GeForce RTX 3060", VRAMTotalBytes: 12 * gib, VRAMFreeBytes: 11 * gib,
			ComputeMajor: 8, ComputeMinor: 6, PCIeGen: 4, PCIeWidth: 4})
		h.GPUs.Devices[0].ComputeMajor, h.GPUs.Devices[0].ComputeMinor = 8, 9
		return h
	}
	deps := hwDeps{probe: host, probeDrive: platform.ProbeDrive,
		inspect: func(context.Context, string) (engine.ModelInfo, error) { return info, nil }}
	var out bytes.Buffer
	if err := hw(context.Background(), []string{"-m", path}, IO{Out: &out, Err: &out}, deps); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"with one helper GPU", "Helper GPU 1, the NVIDIA GeForce RTX 3060 (GPU 1), has room for", "it computes them itself", "--expert-cache-device1="} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("no %q in:\n%s", s, out.String())
		}
	}
}
