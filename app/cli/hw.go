package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"strata/app/wizard"
	"strata/engine"
	"strata/platform"
)

// hwDeps are the fact-finding calls `strata hw` makes; tests replace inspect, which needs a
// real model file.
type hwDeps struct {
	probe      func(context.Context) platform.Host
	probeDrive func(context.Context, string, platform.DriveOptions) (platform.Drive, error)
	inspect    func(context.Context, string) (engine.ModelInfo, error)
}

func runHW(ctx context.Context, args []string, io IO) error {
	return hw(ctx, args, io, hwDeps{probe: platform.Probe, probeDrive: platform.ProbeDrive, inspect: engine.Inspect})
}

// hwReport is the --json object.
type hwReport struct {
	Host           platform.Host          `json:"host"`
	Model          *engine.ModelInfo      `json:"model,omitempty"`
	Drive          *platform.Drive        `json:"drive,omitempty"`
	Recommendation *wizard.Recommendation `json:"recommendation,omitempty"`
	Flags          []string               `json:"flags,omitempty"` // the recommendation as command-line knobs
}

func hw(ctx context.Context, args []string, io IO, deps hwDeps) error {
	fs := newFlags("hw", io)
	modelPath := fs.String("m", "", "model GGUF file: add the recommended mode for it")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	rep := hwReport{Host: deps.probe(ctx)}
	if *modelPath != "" {
		info, err := deps.inspect(ctx, *modelPath)
		if err != nil {
			return err
		}
		drive, err := deps.probeDrive(ctx, *modelPath, platform.DriveOptions{})
		if err != nil {
			return err
		}
		rec := wizard.Recommend(wizard.HardwareFromHost(rep.Host, &drive), wizard.ModelFromInfo(info))
		rep.Model, rep.Drive, rep.Recommendation = &info, &drive, &rec
		rep.Flags = configFlags(rec.Config)
	}
	if *asJSON {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printHW(io.Out, rep)
	return nil
}

// configFlags writes the knobs of cfg that differ from the defaults as flags for run, bench
// and plan, so a recommendation can be pasted onto a command line.
func configFlags(cfg engine.Config) []string {
	def, rec := engine.DefaultConfig(), cfg
	defs := flag.NewFlagSet("defaults", flag.ContinueOnError)
	addEngineFlags(defs, &def)
	recs := flag.NewFlagSet("recommended", flag.ContinueOnError)
	addEngineFlags(recs, &rec)
	var out []string
	recs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if v == defs.Lookup(f.Name).Value.String() {
			return
		}
		if v == "true" {
			out = append(out, "--"+f.Name)
			return
		}
		out = append(out, "--"+f.Name+"="+v)
	})
	return out
}

func printHW(w io.Writer, rep hwReport) {
	h := rep.Host
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-9s %s\n", label, fmt.Sprintf(format, args...))
	}
	osLine := h.OS + "/" + h.Arch
	if h.WSL.WSL2 {
		osLine += fmt.Sprintf(" under WSL2 (pinned RAM budget about %s)", size(h.WSL.PinnedBudgetBytes))
	}
	line("System", "%s", osLine)
	c := h.CPU
	model := c.Model
	if model == "" {
		model = "unknown CPU"
	}
	var isa []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"AVX2", c.AVX2}, {"FMA", c.FMA}, {"AVX-512", c.AVX512}, {"VNNI", c.VNNI}} {
		if f.on {
			isa = append(isa, f.name)
		}
	}
	if len(isa) == 0 {
		isa = []string{"no AVX2"}
	}
	cores := fmt.Sprintf("%d cores", c.PhysicalCores)
	if c.PerformanceCores > 0 {
		cores = fmt.Sprintf("%d cores (%d performance)", c.PhysicalCores, c.PerformanceCores)
	}
	line("CPU", "%s, %s, %d threads, %s", model, cores, c.LogicalCores, strings.Join(isa, " "))
	if h.RAM.TotalBytes > 0 {
		limited := ""
		if h.RAM.CgroupLimited {
			limited = " (the container's limit)"
		}
		line("RAM", "%s, %s available%s", size(h.RAM.TotalBytes), size(h.RAM.AvailableBytes), limited)
	} else {
		line("RAM", "unknown (%s)", h.RAM.Reason)
	}
	if len(h.GPUs.Devices) == 0 {
		line("GPU", "no NVIDIA GPU (%s)", h.GPUs.Reason)
	}
	for _, g := range h.GPUs.Devices {
		s := fmt.Sprintf("%s, %s, %s free", g.Name, size(g.VRAMTotalBytes), size(g.VRAMFreeBytes))
		if g.ComputeMajor > 0 {
			s += fmt.Sprintf(", compute %d.%d", g.ComputeMajor, g.ComputeMinor)
		}
		if g.PCIeGen > 0 {
			s += fmt.Sprintf(", PCIe %d x%d", g.PCIeGen, g.PCIeWidth)
		}
		if g.DisplayActive {
			s += ", drives a display"
		}
		line(fmt.Sprintf("GPU %d", g.Index), "%s", s)
	}
	if len(h.GPUs.Devices) > 0 {
		line("Driver", "%s, CUDA %s", h.GPUs.Driver, h.GPUs.CUDA)
	}
	if rep.Model == nil {
		return
	}
	m := rep.Model
	name := m.Name
	if name == "" {
		name = m.Path
	}
	line("Model", "%s: %s, %s of experts (%d layers x %d, %d used), %s other, context %d",
		name, size(m.FileBytes), size(m.ExpertBytes), m.Layers, m.Experts, m.ExpertsUsed, size(m.NonExpertBytes), m.ContextLength)
	if d := rep.Drive; d != nil {
		s := fmt.Sprintf("%s free of %s", size(d.FreeBytes), size(d.TotalBytes))
		if d.Read.MBps > 0 {
			s += fmt.Sprintf(", reads %.0f MB/s", d.Read.MBps)
		}
		s += fmt.Sprintf(" (%s", d.Read.Class)
		if d.Read.Reason != "" {
			s += ": " + d.Read.Reason
		}
		line("Drive", "%s)", s)
	}
	r := rep.Recommendation
	line("Mode", "%s", r.Mode)
	for _, s := range r.Reasons {
		line("", "%s", s)
	}
	line("Flags", "%s", strings.Join(rep.Flags, " "))
	for _, s := range r.Warnings {
		line("Warning", "%s", s)
	}
	for _, s := range r.WSL2Adjustments {
		line("WSL2", "%s", s)
	}
}

// size writes bytes for people.
func size(n int64) string {
	const gib = 1 << 30
	if n >= gib || n <= -gib {
		return fmt.Sprintf("%.1f GiB", float64(n)/gib)
	}
	if n >= 1<<20 || n <= -(1<<20) {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
