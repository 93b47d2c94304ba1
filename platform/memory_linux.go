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
	return parseMeminfo(f)
}
