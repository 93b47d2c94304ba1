package platform

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Memory is the host's physical RAM.
type Memory struct {
	TotalBytes     int64  `json:"total_bytes"`
	AvailableBytes int64  `json:"available_bytes"`  // what can be used without swapping (Linux MemAvailable)
	Reason         string `json:"reason,omitempty"` // why the numbers are zero
	// CgroupLimited says the numbers are a container's (cgroup) memory limit, not the host's.
	CgroupLimited bool `json:"cgroup_limited,omitempty"`
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

// cgroupLimit finds the tightest memory limit on this process's cgroup and its parents, and the
// usage of the cgroup that sets it. fsys is /sys/fs/cgroup and self is /proc/self/cgroup; both
// cgroup v2 (memory.max) and v1 (memory/…/memory.limit_in_bytes) are understood.
func cgroupLimit(fsys fs.FS, self string) (limit, usage int64, ok bool) {
	for _, line := range strings.Split(self, "\n") {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, maxFile, useFile string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, maxFile, useFile = parts[2], "memory.max", "memory.current"
		case hasController(parts[1], "memory"):
			dir, maxFile, useFile = path.Join("memory", parts[2]), "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		for d := path.Clean("/" + dir); ; d = path.Dir(d) {
			rel := strings.TrimPrefix(d, "/")
			if rel == "" {
				rel = "."
			}
			if l, lok := readCgroupNumber(fsys, path.Join(rel, maxFile)); lok && (!ok || l < limit) {
				u, _ := readCgroupNumber(fsys, path.Join(rel, useFile))
				limit, usage, ok = l, u, true
			}
			if d == "/" {
				break
			}
		}
	}
	return limit, usage, ok
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readCgroupNumber reads a limit file; "max" and v1's near-2^63 "unlimited" are no limit.
func readCgroupNumber(fsys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<60 {
		return 0, false
	}
	return v, true
}

// applyCgroupLimit lowers host numbers to a container's memory limit.
func applyCgroupLimit(m Memory, limit, usage int64) Memory {
	if limit <= 0 || limit >= m.TotalBytes {
		return m
	}
	m.TotalBytes = limit
	m.AvailableBytes = min(m.AvailableBytes, max(0, limit-usage))
	m.CgroupLimited = true
	return m
}
