package platform

import (
	"fmt"
	"os"
)

func probeMemory() (Memory, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return Memory{}, fmt.Errorf("memory: %w", err)
	}
	defer f.Close()
	m, err := parseMeminfo(f)
	if err != nil {
		return m, err
	}
	// In a container the cgroup's limit, not the host's RAM, is what Strata can use.
	if self, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if limit, usage, ok := cgroupLimit(os.DirFS("/sys/fs/cgroup"), string(self)); ok {
			m = applyCgroupLimit(m, limit, usage)
		}
	}
	return m, nil
}
