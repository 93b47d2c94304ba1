package platform

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCPUInfo(t *testing.T) {
	for _, tc := range []struct {
		file              string
		model             string
		logical, physical int
	}{
		{"cpuinfo-intel-ht.txt", "Intel(R) Core(TM) i7-7700 CPU @ 3.60GHz", 4, 2},
		{"cpuinfo-two-sockets.txt", "Intel(R) Xeon(R) Gold 6130", 4, 4},
		{"cpuinfo-arm64.txt", "", 2, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			info, err := parseCPUInfo(f)
			if err != nil {
				t.Fatal(err)
			}
			if info.model != tc.model || info.logical != tc.logical || info.physical != tc.physical {
				t.Errorf("got %+v, want model %q logical %d physical %d", info, tc.model, tc.logical, tc.physical)
			}
		})
	}
}

func TestCoresFromSysfs(t *testing.T) {
	// 4 logical CPUs on 2 cores (SMT pairs 0,2 and 1,3), cpu4 offline (no topology), and the
	// folders sysfs has besides the CPUs.
	fsys := fstest.MapFS{
		"cpu0/topology/core_cpus_list":       {Data: []byte("0,2\n")},
		"cpu1/topology/core_cpus_list":       {Data: []byte("1,3\n")},
		"cpu2/topology/core_cpus_list":       {Data: []byte("0,2\n")},
		"cpu3/topology/thread_siblings_list": {Data: []byte("1,3\n")}, // older kernels
		"cpu4/online":                        {Data: []byte("0\n")},
		"cpufreq/boost":                      {Data: []byte("1\n")},
		"cpuidle/current_driver":             {Data: []byte("none\n")},
	}
	phys, logical, err := coresFromSysfs(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if phys != 2 || logical != 4 {
		t.Errorf("got %d physical %d logical, want 2 and 4", phys, logical)
	}
	if _, _, err := coresFromSysfs(fstest.MapFS{"cpufreq/boost": {}}); err == nil {
		t.Error("no topology: no error")
	}
}

// processorRecord builds one RelationProcessorCore record as Windows lays it out on amd64.
func processorRecord(masks ...uint64) []byte {
	size := 32 + 16*len(masks)
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b[0:], relationProcessorCore)
	binary.LittleEndian.PutUint32(b[4:], uint32(size))
	binary.LittleEndian.PutUint16(b[30:], uint16(len(masks)))
	for i, m := range masks {
		binary.LittleEndian.PutUint64(b[32+16*i:], m)
		binary.LittleEndian.PutUint16(b[40+16*i:], uint16(i))
	}
	return b
}

func TestParseProcessorCores(t *testing.T) {
	var hybrid []byte // 2 SMT cores and 2 single-thread efficiency cores
	for _, m := range []uint64{0b11, 0b1100, 0b10000, 0b100000} {
		hybrid = append(hybrid, processorRecord(m)...)
	}
	other := processorRecord(0xff)
	binary.LittleEndian.PutUint32(other[0:], 2) // a cache record: ignored
	truncated := processorRecord(1)[:20]
	badSize := processorRecord(1)
	binary.LittleEndian.PutUint32(badSize[4:], 4096)
	tooManyGroups := processorRecord(1)
	binary.LittleEndian.PutUint16(tooManyGroups[30:], 9)

	for _, tc := range []struct {
		name              string
		buf               []byte
		physical, logical int
		err               string
	}{
		{name: "hybrid", buf: hybrid, physical: 4, logical: 6},
		{name: "two groups", buf: processorRecord(1, 1), physical: 1, logical: 2},
		{name: "skips other records", buf: append(append([]byte{}, other...), processorRecord(0b11)...), physical: 1, logical: 2},
		{name: "empty", buf: nil, err: "no processor core records"},
		{name: "truncated", buf: truncated, err: "truncated record at offset 0"},
		{name: "bad size", buf: badSize, err: "bad size 4096"},
		{name: "groups overflow", buf: tooManyGroups, err: "9 groups do not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, l, err := parseProcessorCores(tc.buf)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.physical || l != tc.logical {
				t.Errorf("got %d/%d, want %d/%d", p, l, tc.physical, tc.logical)
			}
		})
	}
}

func TestProbeCPUOnThisHost(t *testing.T) {
	c := probeCPU()
	if c.LogicalCores < 1 || c.PhysicalCores < 1 || c.PhysicalCores > c.LogicalCores {
		t.Errorf("implausible cores: %+v", c)
	}
	if c.LogicalCores < runtime.NumCPU() {
		t.Errorf("logical cores %d < runtime.NumCPU %d", c.LogicalCores, runtime.NumCPU())
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && c.Model == "" {
		t.Errorf("no model name on linux/amd64: %+v", c)
	}
	if c.AVX512 && !c.AVX2 {
		t.Errorf("AVX-512 without AVX2: %+v", c)
	}
	for _, f := range c.Features {
		if f == "avx2" && !c.AVX2 {
			t.Errorf("features list avx2 but AVX2 is false")
		}
	}
}
