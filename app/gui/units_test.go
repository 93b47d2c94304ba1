package gui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"strata/app/store"
	"strata/engine"
	"strata/platform"
)

func TestSplitBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     []block
	}{
		{"prose", "Hello **world**", []block{{Text: "Hello **world**"}}},
		{"code between prose", "Before:\n```go\nfmt.Println(1)\n```\nAfter.", []block{
			{Text: "Before:"}, {Code: true, Lang: "go", Text: "fmt.Println(1)"}, {Text: "After."}}},
		{"unclosed while streaming", "Look:\n```py\nprint(", []block{{Text: "Look:"}, {Code: true, Lang: "py", Text: "print("}}},
		{"tilde fence keeps backticks", "~~~\n```\n~~~", []block{{Code: true, Text: "```"}}},
		{"empty", "", nil},
	} {
		if got := splitBlocks(tc.md); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.name, got, tc.want)
		}
	}
}

func TestParseSampling(t *testing.T) {
	good := fieldsOf(preset(PresetCreative))
	sp, err := parseSampling(good)
	if err != nil || sp != preset(PresetCreative) {
		t.Fatalf("round trip of creative: %+v, %v", sp, err)
	}
	for _, tc := range []struct {
		field string
		set   func(*advancedFields)
	}{
		{"temperature", func(a *advancedFields) { a.Temperature = "hot" }},
		{"temperature", func(a *advancedFields) { a.Temperature = "-1" }},
		{"top-p", func(a *advancedFields) { a.TopP = "1.5" }},
		{"top-k", func(a *advancedFields) { a.TopK = "-3" }},
		{"max tokens", func(a *advancedFields) { a.MaxTokens = "1e3" }},
		{"seed", func(a *advancedFields) { a.Seed = "-1" }},
	} {
		f := good
		tc.set(&f)
		if _, err := parseSampling(f); err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.field) {
			t.Errorf("%s: error %v should name the field", tc.field, err)
		}
	}
}

func TestPresetsDiffer(t *testing.T) {
	p, b, c := preset(PresetPrecise), preset(PresetBalanced), preset(PresetCreative)
	if !(p.Temperature < b.Temperature && b.Temperature < c.Temperature) {
		t.Errorf("temperatures should rise precise < balanced < creative: %v %v %v", p.Temperature, b.Temperature, c.Temperature)
	}
	if preset("nonsense") != b {
		t.Error("an unknown preset should fall back to balanced")
	}
}

// TestFriendlyErrors: the advice follows the error's kind (errors.Is / As), whatever its
// text says.
func TestFriendlyErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("gguf: model.bin: bad magic 0x1234: %w", engine.ErrNotGGUF), "not a GGUF model"},
		{fmt.Errorf(`model: m.gguf: architecture "llama": %w`, engine.ErrUnsupportedArch), "architecture yet"},
		{fmt.Errorf("engine: kv cache of 40 GiB: %w", engine.ErrBudgetTooSmall), "try a shorter context (8k)"},
		{fmt.Errorf("gpu: upload: %w", engine.ErrOutOfVRAM), "graphics card ran out of memory"},
		{fmt.Errorf("gguf: tensor \"x\": out of bounds: %w", engine.ErrDamaged), "damaged or incomplete"},
		{fmt.Errorf("engine: open x.gguf: %w", engine.ErrNotFound), "not there any more"},
		{fmt.Errorf("store: x: %w", fs.ErrPermission), "not allowed"},
		{fmt.Errorf("store: settings.json: %w to settings.json.corrupt-1", store.ErrCorrupt), "moved aside"},
		{&engine.ConfigError{Flag: "kv", Msg: `"q3" is not one of f16, int8`}, "Open Settings and correct it"},
		{&engine.ConfigError{Flag: "spec", Msg: "not built yet", NotBuilt: true}, "cannot do that yet"},
		// The text alone decides nothing: a plain error that mentions magic is not "not GGUF".
		{errors.New("gguf: bad magic, architecture, out of memory, --kv"), "Try again"},
	} {
		got := friendly("Loading the model", tc.err)
		if !strings.Contains(got, tc.want) || !strings.Contains(got, tc.err.Error()) {
			t.Errorf("%v:\n got %q\nwant it to contain %q and the details", tc.err, got, tc.want)
		}
	}
	if got := friendly("Loading", fmt.Errorf("engine: open: %w", context.Canceled)); got != "Loading was cancelled." {
		t.Errorf("cancelled: %q", got)
	}
}

func TestPhaseMeter(t *testing.T) {
	var m phaseMeter
	t0 := time.Unix(100, 0)
	p := m.update("vram-fill", 0, 1000e6, t0)
	if p.Fraction != 0 || p.MBps != 0 {
		t.Fatalf("start: %+v", p)
	}
	p = m.update("vram-fill", 500e6, 1000e6, t0.Add(2*time.Second))
	if p.Fraction != 0.5 || p.MBps != 250 {
		t.Fatalf("half way: %+v, want 0.5 and 250 MB/s", p)
	}
	p = m.update("ram-copy", 0, 0, t0.Add(3*time.Second))
	if p.Fraction != -1 || p.MBps != 0 {
		t.Fatalf("new phase with unknown total: %+v", p)
	}
	if len(p.Finished) != 1 || p.Finished[0] != (phaseDone{Phase: "vram-fill", Took: 3 * time.Second, MBps: 250}) {
		t.Fatalf("finished phases %+v", p.Finished)
	}
	if got := phaseHistory(p.Finished); got != "✓ Filling the GPU expert cache: 3.0 s, 250 MB/s" {
		t.Errorf("phaseHistory: %q", got)
	}
	if got := progressDetail(loadProgress{Done: 512 << 20, Total: 1 << 30, MBps: 812}); got != "512.0 MiB of 1.0 GiB · 812 MB/s" {
		t.Errorf("progressDetail: %q", got)
	}
}

func TestCardText(t *testing.T) {
	info := engine.ModelInfo{Path: "/m/q.gguf", Name: "Qwen3-30B-A3B", Architecture: "qwen3moe", FileBytes: 17 << 30,
		Quantization: "Q4_K", TotalParams: 30.5e9, ActiveParams: 3.3e9, Layers: 48, Experts: 128, ExpertsUsed: 8,
		ExpertBytes: 16 << 30, NonExpertBytes: 1 << 30}
	got := cardText(info, engine.DefaultConfig())
	for _, want := range []string{"Qwen3-30B-A3B", "qwen3moe", "30.5B in all, 3.3B active", "128 per layer, 8 used", "Q4_K", "17.0 GiB", "GPU:", "RAM:", "SSD:"} {
		if !strings.Contains(got, want) {
			t.Errorf("card lacks %q:\n%s", want, got)
		}
	}
	cpu := engine.DefaultConfig()
	cpu.Backend = "cpu"
	if got := cardText(info, cpu); strings.Contains(got, "GPU:") || !strings.Contains(got, "Everything on the CPU") {
		t.Errorf("cpu card:\n%s", got)
	}
}

func TestMarkdownKeepsAngleBrackets(t *testing.T) {
	test.NewTempApp(t)
	for _, tc := range []struct{ in, want string }{
		{"use <div> and <unused_20> here", "use <div> and <unused_20> here"},
		{"in code `<b>` stays", "in code <b> stays"},
		{"a < b > c", "a < b > c"},
		{"tick <a`b> tag", "tick <a`b> tag"},
		// Tags side by side (as a model's special tokens come) must not make a `` fence.
		{"x <unused_19><unused_180>S y", "x <unused_19><unused_180>S y"},
		{"two <a``b><c> ticks", "two <a``b><c> ticks"},
		// Backticks count as CommonMark counts them: an escaped or unclosed one is text,
		// and one next to a tag does not join the tag's fence. (Fyne shows backslash
		// escapes as written, and puts a space between text and a span after it.)
		{"lone ` tick <b> here", "lone ` tick <b> here"},
		{"esc \\` then <b>", "esc \\` then <b>"},
		{"x \\<b> y", "x \\ <b> y"},
		{"span `c` then ` and <b>", "span c then ` and <b>"},
		{"a <b>`c` d", "a <b> c d"},
		{"a <b>` d", "a <b>` d"},
	} {
		rt := widget.NewRichTextFromMarkdown(escapeHTML(tc.in))
		if got := strings.Join(strings.Fields(strings.ReplaceAll(rt.String(), wrapPoint, "")), " "); got != tc.want {
			t.Errorf("%q rendered as %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMachineWords(t *testing.T) {
	h := platform.Host{
		CPU:  platform.CPU{Model: "Ryzen 7 7700", PhysicalCores: 8, LogicalCores: 16, AVX2: true, AVX512: true, VNNI: true},
		RAM:  platform.Memory{TotalBytes: 32 << 30, AvailableBytes: 20 << 30},
		GPUs: platform.GPUs{Devices: []platform.GPU{{Name: "NVIDIA GeForce RTX 4070", VRAMTotalBytes: 12 << 30, DisplayActive: true, PCIeGen: 4, PCIeWidth: 16}}},
		WSL:  platform.WSL{WSL2: true},
	}
	got := strings.Join(machineWords(h), "\n")
	want := "Ryzen 7 7700 with 8 cores (16 threads), AVX-512 and VNNI.\n32.0 GiB of RAM, 20.0 GiB free now.\n" +
		"NVIDIA GeForce RTX 4070 with 12.0 GiB of VRAM, driving your screen, PCIe 4 x16.\nRunning inside WSL2 on Windows."
	if got != want {
		t.Errorf("machineWords:\n got %q\nwant %q", got, want)
	}
	a := Advice{Warnings: []string{"about a model"}}
	machineOnly(&a, h)
	if a.Warnings != nil || !strings.Contains(a.Reason, "RTX 4070") {
		t.Errorf("machineOnly: %+v", a)
	}
}

// TestSpeedLineShowsTierNotes: what the tiers could not do as planned, and the PCIe share
// when the GPU reads pinned misses, reach the tier map.
func TestSpeedLineShowsTierNotes(t *testing.T) {
	s := engine.TierSnapshot{TokensPerSec: 12.5, Swaps: 3}
	if got := speedLine(s); got != "Decode: 12.5 tokens/s · swaps: 3" {
		t.Errorf("plain line %q", got)
	}
	s.Cache = &engine.CacheActivity{Notes: []string{"the RAM arena is not page-locked"}}
	if got := speedLine(s); !strings.Contains(got, "Note: the RAM arena is not page-locked") || strings.Contains(got, "PCIe") {
		t.Errorf("notes missing, or a PCIe share without PCIe reads: %q", got)
	}
	s.Cache = &engine.CacheActivity{PCIeReads: 40, PCIeShare: 0.35}
	if got := speedLine(s); got != "Decode: 12.5 tokens/s · swaps: 3 · read over PCIe: 35% of RAM misses" {
		t.Errorf("PCIe share: %q", got)
	}
}

// TestShortTimesAreNotZero: a load that took a few milliseconds does not say "0.0 s".
func TestShortTimesAreNotZero(t *testing.T) {
	for d, want := range map[time.Duration]string{
		35 * time.Millisecond:   "Ready in 35 ms",
		99 * time.Millisecond:   "Ready in 99 ms",
		100 * time.Millisecond:  "Ready in 0.1 s",
		2345 * time.Millisecond: "Ready in 2.3 s",
	} {
		if got := readyText(d); got != want {
			t.Errorf("readyText(%v) = %q, want %q", d, got, want)
		}
	}
	if got := phaseHistory([]phaseDone{{Phase: "mapping", Took: 4 * time.Millisecond}}); got != "✓ Mapping the model file: 4 ms" {
		t.Errorf("phaseHistory: %q", got)
	}
}
