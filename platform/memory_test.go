package platform

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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
