package platform

import (
	"encoding/binary"
	"fmt"
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
func processorRecord(masks ...uint64) []byte { return processorRecordClass(0, masks...) }

func processorRecordClass(class byte, masks ...uint64) []byte {
	size := 32 + 16*len(masks)
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b[0:], relationProcessorCore)
	binary.LittleEndian.PutUint32(b[4:], uint32(size))
	b[9] = class
	binary.LittleEndian.PutUint16(b[30:], uint16(len(masks)))
	for i, m := range masks {
		binary.LittleEndian.PutUint64(b[32+16*i:], m)
		binary.LittleEndian.PutUint16(b[40+16*i:], uint16(i))
	}
	return b
}

func TestParseProcessorCores(t *testing.T) {
	var hybrid []byte // 2 SMT performance cores (class 1) and 2 single-thread efficiency cores
	for i, m := range []uint64{0b11, 0b1100, 0b10000, 0b100000} {
		hybrid = append(hybrid, processorRecordClass(byte(1-i/2), m)...)
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
		performance       int
		err               string
	}{
		{name: "hybrid", buf: hybrid, physical: 4, logical: 6, performance: 2},
		{name: "two groups", buf: processorRecord(1, 1), physical: 1, logical: 2},
		{name: "skips other records", buf: append(append([]byte{}, other...), processorRecord(0b11)...), physical: 1, logical: 2},
		{name: "empty", buf: nil, err: "no processor core records"},
		{name: "truncated", buf: truncated, err: "truncated record at offset 0"},
		{name: "bad size", buf: badSize, err: "bad size 4096"},
		{name: "groups overflow", buf: tooManyGroups, err: "9 groups do not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, l, perf, err := parseProcessorCores(tc.buf)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.physical || l != tc.logical || perf != tc.performance {
				t.Errorf("got %d/%d/%d, want %d/%d/%d", p, l, perf, tc.physical, tc.logical, tc.performance)
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

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"0-3\n", []int{0, 1, 2, 3}, false},
		{"0,2,4-5", []int{0, 2, 4, 5}, false},
		{"", nil, false},
		{"3-1", nil, true},
		{"a-b", nil, true},
		{"0-99999999", nil, true},
	} {
		got, err := parseCPUList(tc.in)
		if (err != nil) != tc.err || len(got) != len(tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v", tc.in, got, err)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("parseCPUList(%q) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

func TestPerformanceCoresFromSysfs(t *testing.T) {
	// An i5-12600K: 6 P-cores with SMT (CPUs 0-11) and 4 E-cores (12-15).
	cpus := fstest.MapFS{}
	for c := 0; c < 12; c++ {
		cpus[fmt.Sprintf("cpu%d/topology/core_cpus_list", c)] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d-%d\n", c/2*2, c/2*2+1))}
	}
	for c := 12; c < 16; c++ {
		cpus[fmt.Sprintf("cpu%d/topology/core_cpus_list", c)] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d\n", c))}
	}
	hybrid := fstest.MapFS{"cpu_core/cpus": {Data: []byte("0-11\n")}, "cpu_atom/cpus": {Data: []byte("12-15\n")}}
	if got := performanceCoresFromSysfs(hybrid, cpus); got != 6 {
		t.Errorf("hybrid: %d P-cores, want 6", got)
	}
	if got := performanceCoresFromSysfs(fstest.MapFS{"cpu/type": {}}, cpus); got != 0 {
		t.Errorf("not hybrid: %d, want 0", got)
	}
}
