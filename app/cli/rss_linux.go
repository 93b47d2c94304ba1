package cli

import (
	"fmt"
	"os"
	"strings"
)

// peakRSS is the process's peak resident set (VmHWM), 0 when unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// diskReadBytes is what the process has read from storage (read_bytes of /proc/self/io:
// page-cache hits do not count), 0 when unknown.
func diskReadBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var n int64
		if _, err := fmt.Sscanf(line, "read_bytes: %d", &n); err == nil {
			return n
		}
	}
	return 0
}
