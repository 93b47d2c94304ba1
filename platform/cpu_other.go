//go:build !linux && !windows

package platform

import "runtime"

func probeCPU() CPU {
	c := CPU{LogicalCores: runtime.NumCPU(), Reason: "model and physical cores unknown on this OS"}
	c.PhysicalCores = c.LogicalCores
	c.setFeatures()
	return c
}
