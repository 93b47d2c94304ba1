package platform

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		file         string
		total, avail int64
		err          string
	}{
		{file: "meminfo-modern.txt", total: 32768000 << 10, avail: 20480000 << 10},
		{file: "meminfo-old-kernel.txt", total: 8000000 << 10, avail: (1000000 + 200000 + 3000000) << 10},
		{file: "meminfo-broken.txt", err: `MemTotal: "lots" is not a number`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := parseMeminfo(f)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.TotalBytes != tc.total || m.AvailableBytes != tc.avail {
				t.Errorf("got total %d avail %d, want %d %d", m.TotalBytes, m.AvailableBytes, tc.total, tc.avail)
			}
		})
	}
	if _, err := parseMeminfo(strings.NewReader("MemFree: 10 kB\n")); err == nil {
		t.Error("meminfo without MemTotal: no error")
	}
}

func TestProbeMemoryOnThisHost(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "windows" {
		t.Skip("memory facts are only read on Linux and Windows")
	}
	m, err := probeMemory()
	if err != nil {
		t.Fatal(err)
	}
	if m.TotalBytes < 256<<20 || m.AvailableBytes <= 0 || m.AvailableBytes > m.TotalBytes {
		t.Errorf("implausible memory: total %d available %d", m.TotalBytes, m.AvailableBytes)
	}
}

func TestCgroupLimit(t *testing.T) {
	const gib = 1 << 30
	v2 := fstest.MapFS{
		"memory.max":                  {Data: []byte("max\n")},
		"app.slice/memory.max":        {Data: []byte("8589934592\n")}, // 8 GiB on the parent
		"app.slice/memory.current":    {Data: []byte("1073741824\n")},
		"app.slice/me/memory.max":     {Data: []byte("max\n")},
		"app.slice/me/memory.current": {Data: []byte("536870912\n")},
	}
	v1 := fstest.MapFS{
		"memory/memory.limit_in_bytes":            {Data: []byte("9223372036854771712\n")},
		"memory/docker/abc/memory.limit_in_bytes": {Data: []byte("4294967296\n")},
		"memory/docker/abc/memory.usage_in_bytes": {Data: []byte("1073741824\n")},
	}
	for _, tc := range []struct {
		name         string
		fsys         fstest.MapFS
		self         string
		limit, usage int64
		ok           bool
	}{
		{"v2 parent limit", v2, "0::/app.slice/me\n", 8 * gib, 1 * gib, true},
		{"v2 no limit", v2, "0::/\n", 0, 0, false},
		{"v1 container", v1, "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n", 4 * gib, 1 * gib, true},
		{"v1 unlimited", v1, "4:memory:/\n", 0, 0, false},
		{"hybrid, no limits (this CI's kind)", v1, "4:memory:/other\n0::/\n", 0, 0, false},
		{"garbage", v2, "nonsense", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, u, ok := cgroupLimit(tc.fsys, tc.self)
			if l != tc.limit || u != tc.usage || ok != tc.ok {
				t.Errorf("got %d %d %v, want %d %d %v", l, u, ok, tc.limit, tc.usage, tc.ok)
			}
		})
	}
	m := applyCgroupLimit(Memory{TotalBytes: 64 * gib, AvailableBytes: 60 * gib}, 8*gib, 1*gib)
	if m.TotalBytes != 8*gib || m.AvailableBytes != 7*gib || !m.CgroupLimited {
		t.Errorf("applied: %+v", m)
	}
	if m := applyCgroupLimit(Memory{TotalBytes: 16 * gib, AvailableBytes: 10 * gib}, 32*gib, 0); m.CgroupLimited || m.TotalBytes != 16*gib {
		t.Errorf("a limit above the RAM changed it: %+v", m)
	}
}
