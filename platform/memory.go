package platform

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Memory is the host's physical RAM.
type Memory struct {
	TotalBytes     int64  `json:"total_bytes"`
	AvailableBytes int64  `json:"available_bytes"`  // what can be used without swapping (Linux MemAvailable)
	Reason         string `json:"reason,omitempty"` // why the numbers are zero
}

// parseMeminfo reads /proc/meminfo. Kernels before 3.14 have no MemAvailable; then the
// estimate is MemFree + Buffers + Cached.
func parseMeminfo(r io.Reader) (Memory, error) {
	kb := map[string]int64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("meminfo: %s: %q is not a number", name, f[0])
		}
		kb[name] = v
	}
	if err := sc.Err(); err != nil {
		return Memory{}, fmt.Errorf("meminfo: %w", err)
	}
	total, ok := kb["MemTotal"]
	if !ok || total <= 0 {
		return Memory{}, fmt.Errorf("meminfo: no MemTotal line")
	}
	avail, ok := kb["MemAvailable"]
	if !ok {
		avail = kb["MemFree"] + kb["Buffers"] + kb["Cached"]
	}
	return Memory{TotalBytes: total << 10, AvailableBytes: avail << 10}, nil
}
