package platform

import (
	"os"
	"runtime"
)

func probeCPU() CPU {
	var c CPU
	c.setFeatures()
	f, err := os.Open("/proc/cpuinfo")
	var info cpuInfo
	if err == nil {
		info, err = parseCPUInfo(f)
		f.Close()
	}
	if err != nil {
		c.Reason = err.Error()
	}
	c.Model = info.model
	physical, logical, serr := coresFromSysfs(os.DirFS("/sys/devices/system/cpu"))
	switch {
	case serr == nil:
		c.PhysicalCores, c.LogicalCores = physical, logical
	case info.physical > 0:
		c.PhysicalCores, c.LogicalCores = info.physical, info.logical
	default:
		// Neither source says which CPUs share a core: assume no SMT.
		c.LogicalCores = max(info.logical, runtime.NumCPU())
		c.PhysicalCores = c.LogicalCores
		c.Reason = join(c.Reason, "physical cores unknown, assumed equal to logical: "+serr.Error())
	}
	c.PerformanceCores = performanceCoresFromSysfs(os.DirFS("/sys/devices"), os.DirFS("/sys/devices/system/cpu"))
	return c
}
