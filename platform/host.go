package platform

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Host is everything Probe learns about the machine.
type Host struct {
	OS   string `json:"os"`   // runtime.GOOS
	Arch string `json:"arch"` // runtime.GOARCH
	RAM  Memory `json:"ram"`
	CPU  CPU    `json:"cpu"`
	GPUs GPUs   `json:"gpus"`
	WSL  WSL    `json:"wsl"`
}

// Probe timeouts: long enough for a GPU waking from a low-power state, short enough that the
// app never looks frozen.
const (
	memoryTimeout = 2 * time.Second
	cpuTimeout    = 2 * time.Second
	gpuTimeout    = 10 * time.Second
	wslTimeout    = 2 * time.Second
)

// Probe gathers the host facts. It never fails: each fact that cannot be found is zero with
// a reason, and each probe gives up after its timeout or when ctx ends.
func Probe(ctx context.Context) Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH}
	wsl, err := within(ctx, wslTimeout, func(context.Context) (WSL, error) { return probeWSL(), nil })
	if err != nil {
		wsl = WSL{Reason: "wsl check: " + err.Error()}
	}
	h.WSL = wsl
	// NVML can take a second or more to start; the other probes run meanwhile.
	var wg sync.WaitGroup
	wg.Go(func() { h.RAM = probeMemoryWithin(ctx) })
	wg.Go(func() { h.CPU = probeCPUWithin(ctx) })
	wg.Go(func() { h.GPUs = probeGPUsWithin(ctx, wsl.WSL2) })
	wg.Wait()
	return h
}

func probeMemoryWithin(ctx context.Context) Memory {
	m, err := within(ctx, memoryTimeout, func(context.Context) (Memory, error) { return probeMemory() })
	if err != nil {
		return Memory{Reason: "memory: " + err.Error()}
	}
	return m
}

func probeCPUWithin(ctx context.Context) CPU {
	c, err := within(ctx, cpuTimeout, func(context.Context) (CPU, error) { return probeCPU(), nil })
	if err != nil {
		c = CPU{Reason: "cpu: " + err.Error(), LogicalCores: runtime.NumCPU()}
		c.setFeatures()
	}
	return c
}

func probeGPUsWithin(ctx context.Context, wsl2 bool) GPUs {
	g, err := within(ctx, gpuTimeout, func(context.Context) (GPUs, error) {
		api, err := openNVML(wsl2)
		if err != nil {
			return GPUs{Reason: "NVML not available: " + err.Error()}, nil
		}
		return gpusFrom(api), nil
	})
	if err != nil {
		g = GPUs{Reason: "NVML: " + err.Error()}
	}
	if g.Devices == nil {
		g.Devices = []GPU{} // JSON readers get [], not null
	}
	return g
}

// within runs probe in its own goroutine and stops waiting after d or when ctx ends, so an OS
// call that never returns (a hung driver, a dead network share) cannot hang the caller. The
// probe gets the bounded context and should stop early when it can.
func within[T any](ctx context.Context, d time.Duration, probe func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // buffered: a late probe finishes and is collected by the GC
	go func() {
		v, err := probe(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("gave up after %v: %w", d, context.Cause(ctx))
	}
}

// ProbeMemory reads RAM total and available now (cheap: no GPU or drive probes), within its
// timeout; zero values carry a Reason.
func ProbeMemory(ctx context.Context) Memory { return probeMemoryWithin(ctx) }
