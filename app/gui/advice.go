package gui

import (
	"context"
	"fmt"
	"strings"

	"strata/app/wizard"
	"strata/engine"
	"strata/platform"
)

// Advice is what the hardware wizard shows: the machine in plain words and the mode
// Strata recommends for it, with the configuration that mode means.
type Advice struct {
	Machine  []string // one plain sentence per fact (CPU, RAM, GPUs)
	Mode     string   // the wizard's mode name (wizard.Mode)
	Reason   string   // one sentence: why this mode
	Config   engine.Config
	Warnings []string
}

// hostAdvice probes this PC and asks the wizard what to do with model (the zero value
// when no model has been chosen yet: the advice is then about the machine alone).
func hostAdvice(ctx context.Context, model engine.ModelInfo) (Advice, error) {
	host := platform.Probe(ctx)
	rec := wizard.Recommend(wizard.HardwareFromHost(host, nil), wizard.ModelFromInfo(model))
	a := adviceFrom(host, rec)
	if model.FileBytes == 0 {
		machineOnly(&a, host)
	}
	return a, nil
}

// machineOnly rewords advice made without a model: the wizard's reason and warnings are
// about a model's sizes, which are unknown until one is picked.
func machineOnly(a *Advice, h platform.Host) {
	a.Warnings = nil
	if len(h.GPUs.Devices) == 0 {
		a.Reason = "No NVIDIA graphics card was found, so models run on the processor; Strata keeps the experts a model uses most in RAM and reads the rest from the SSD."
		return
	}
	a.Reason = fmt.Sprintf("Strata will keep a model's shared weights and its most-used experts on the %s and size its caches for each model when you load it.", h.GPUs.Devices[0].Name)
}

// adviceFrom puts a host and the wizard's recommendation in plain words.
func adviceFrom(h platform.Host, rec wizard.Recommendation) Advice {
	a := Advice{Mode: string(rec.Mode), Config: rec.Config, Warnings: rec.Warnings}
	if len(rec.Reasons) > 0 {
		a.Reason = rec.Reasons[0]
	}
	a.Machine = machineWords(h)
	return a
}

// machineWords describes the machine in a few plain sentences.
func machineWords(h platform.Host) []string {
	var out []string
	cpu := h.CPU.Model
	if cpu == "" {
		cpu = "A processor"
	}
	var feats []string
	if h.CPU.AVX512 {
		feats = append(feats, "AVX-512")
	} else if h.CPU.AVX2 {
		feats = append(feats, "AVX2")
	}
	if h.CPU.VNNI {
		feats = append(feats, "VNNI")
	}
	line := fmt.Sprintf("%s with %d cores (%d threads)", cpu, h.CPU.PhysicalCores, h.CPU.LogicalCores)
	if len(feats) > 0 {
		line += ", " + strings.Join(feats, " and ")
	}
	out = append(out, line+".")
	if h.RAM.TotalBytes > 0 {
		out = append(out, fmt.Sprintf("%s of RAM, %s free now.", humanBytes(h.RAM.TotalBytes), humanBytes(h.RAM.AvailableBytes)))
	} else {
		out = append(out, "The amount of RAM could not be read ("+h.RAM.Reason+").")
	}
	if len(h.GPUs.Devices) == 0 {
		why := h.GPUs.Reason
		if why == "" {
			why = "no NVIDIA driver answered"
		}
		out = append(out, "No NVIDIA graphics card found ("+why+"): Strata will run on the CPU.")
	}
	for _, g := range h.GPUs.Devices {
		s := fmt.Sprintf("%s with %s of VRAM", g.Name, humanBytes(g.VRAMTotalBytes))
		if g.DisplayActive {
			s += ", driving your screen"
		}
		if g.PCIeGen > 0 {
			s += fmt.Sprintf(", PCIe %d x%d", g.PCIeGen, g.PCIeWidth)
		}
		out = append(out, s+".")
	}
	if h.WSL.WSL2 {
		out = append(out, "Running inside WSL2 on Windows.")
	}
	return out
}
