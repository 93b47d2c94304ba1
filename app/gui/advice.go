package gui

import (
	"context"
	"fmt"
	"runtime"

	"strata/engine"
)

// Advice is what the hardware wizard shows: the machine in plain words and the mode
// Strata recommends for it, with the configuration that mode means.
type Advice struct {
	Machine  []string // one plain sentence per fact (CPU, RAM, GPUs, disk)
	Mode     string   // one of the settings panel's modes
	Reason   string   // one sentence: why this mode
	Config   engine.Config
	Warnings []string
}

// basicAdvice is the wizard's data source while app/wizard (platform facts and Recommend)
// is not in the tree: it says only what the Go runtime knows and lets the engine choose.
// When wizard.Recommend lands, Options.Advise points at an adapter of it instead.
func basicAdvice(context.Context) (Advice, error) {
	cfg := engine.DefaultConfig()
	return Advice{
		Machine: []string{
			fmt.Sprintf("%d CPU threads, %s on %s.", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH),
			"Memory and graphics cards are not detected by this build yet.",
		},
		Mode:   modeOf(cfg),
		Reason: "Strata will use an NVIDIA GPU if it finds one and the CPU otherwise, sizing its caches to the memory it sees.",
		Config: cfg,
	}, nil
}
