package platform

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

func probeCPU() CPU {
	var c CPU
	c.setFeatures()
	model, err := cpuModelFromRegistry()
	if err != nil {
		c.Reason = err.Error()
	}
	c.Model = model
	physical, logical, performance, err := processorCores()
	if err != nil {
		c.LogicalCores = runtime.NumCPU()
		c.PhysicalCores = c.LogicalCores
		c.Reason = join(c.Reason, "physical cores unknown, assumed equal to logical: "+err.Error())
		return c
	}
	c.PhysicalCores, c.LogicalCores, c.PerformanceCores = physical, logical, performance
	return c
}

func cpuModelFromRegistry() (string, error) {
	const key = `HARDWARE\DESCRIPTION\System\CentralProcessor\0`
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if err != nil {
		return "", fmt.Errorf("cpu model: registry %s: %w", key, err)
	}
	defer k.Close()
	s, _, err := k.GetStringValue("ProcessorNameString")
	if err != nil {
		return "", fmt.Errorf("cpu model: registry %s: %w", key, err)
	}
	return s, nil
}

// processorCores asks GetLogicalProcessorInformationEx for one record per physical core.
func processorCores() (physical, logical, performance int, err error) {
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("GetLogicalProcessorInformationEx")
	if err := proc.Find(); err != nil {
		return 0, 0, 0, err
	}
	var n uint32
	r, _, callErr := proc.Call(relationProcessorCore, 0, uintptr(unsafe.Pointer(&n)))
	if r == 0 && !errors.Is(callErr, windows.ERROR_INSUFFICIENT_BUFFER) {
		return 0, 0, 0, fmt.Errorf("GetLogicalProcessorInformationEx: %w", callErr)
	}
	if n == 0 {
		return 0, 0, 0, fmt.Errorf("GetLogicalProcessorInformationEx: empty answer")
	}
	buf := make([]uint64, (n+7)/8) // 8-byte aligned, as the records require
	r, _, callErr = proc.Call(relationProcessorCore, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)))
	if r == 0 {
		return 0, 0, 0, fmt.Errorf("GetLogicalProcessorInformationEx: %w", callErr)
	}
	return parseProcessorCores(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), n))
}
