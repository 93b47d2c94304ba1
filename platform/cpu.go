package platform

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/cpu"
)

// CPU describes the processor the CPU kernels run on.
type CPU struct {
	Model         string `json:"model"`
	PhysicalCores int    `json:"physical_cores"`
	LogicalCores  int    `json:"logical_cores"`
	// PerformanceCores counts the fast cores of a hybrid CPU (Intel's P-cores); 0 when the
	// cores are all alike or the OS does not say.
	PerformanceCores int      `json:"performance_cores,omitempty"`
	AVX2             bool     `json:"avx2"`
	FMA              bool     `json:"fma"`
	AVX512           bool     `json:"avx512"` // AVX-512 F, BW and VL: what the kernels need
	VNNI             bool     `json:"vnni"`   // AVX-512 VNNI or AVX-VNNI: int8 dot products
	Features         []string `json:"features"`
	Reason           string   `json:"reason,omitempty"` // why something is missing or estimated
}

// setFeatures fills the instruction-set flags from CPUID (x/sys/cpu already checks that the OS
// saves the wide registers, so a flag here means usable, not merely present).
func (c *CPU) setFeatures() {
	c.AVX2 = cpu.X86.HasAVX2
	c.FMA = cpu.X86.HasFMA
	c.AVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
	c.VNNI = cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI
	c.Features = nil
	for _, f := range []struct {
		name string
		has  bool
	}{
		{"sse4.2", cpu.X86.HasSSE42},
		{"avx", cpu.X86.HasAVX},
		{"avx2", cpu.X86.HasAVX2},
		{"fma", cpu.X86.HasFMA},
		{"f16c", cpu.X86.HasF16C},
		{"avx512f", cpu.X86.HasAVX512F},
		{"avx512bw", cpu.X86.HasAVX512BW},
		{"avx512vl", cpu.X86.HasAVX512VL},
		{"avx512vnni", cpu.X86.HasAVX512VNNI},
		{"avx512bf16", cpu.X86.HasAVX512BF16},
		{"avxvnni", cpu.X86.HasAVXVNNI},
		{"asimd", cpu.ARM64.HasASIMD},
		{"asimddp", cpu.ARM64.HasASIMDDP},
		{"sve", cpu.ARM64.HasSVE},
	} {
		if f.has {
			c.Features = append(c.Features, f.name)
		}
	}
}

// cpuInfo is what /proc/cpuinfo says.
type cpuInfo struct {
	model    string
	logical  int
	physical int // distinct (physical id, core id) pairs; 0 when the file does not say
}

// parseCPUInfo reads /proc/cpuinfo: one block per logical CPU.
func parseCPUInfo(r io.Reader) (cpuInfo, error) {
	var info cpuInfo
	cores := map[string]bool{}
	var pkg, core string
	flush := func() {
		if core != "" {
			cores[pkg+"/"+core] = true
		}
		pkg, core = "", ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // flag lines are long
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			flush()
			info.logical++
		case "model name":
			if info.model == "" {
				info.model = v
			}
		case "physical id":
			pkg = v
		case "core id":
			core = v
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return cpuInfo{}, fmt.Errorf("cpuinfo: %w", err)
	}
	info.physical = len(cores)
	return info, nil
}

// isCPUDir tells the per-CPU folders of /sys/devices/system/cpu ("cpu12") from the rest.
func isCPUDir(name string) bool {
	digits, ok := strings.CutPrefix(name, "cpu")
	if !ok || digits == "" {
		return false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// coresFromSysfs counts logical CPUs and physical cores from a /sys/devices/system/cpu tree:
// the CPUs that share a core list the same siblings, so each distinct list is one core.
func coresFromSysfs(fsys fs.FS) (physical, logical int, err error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return 0, 0, fmt.Errorf("sysfs cpu: %w", err)
	}
	cores := map[string]bool{}
	for _, e := range entries {
		if !isCPUDir(e.Name()) {
			continue
		}
		var sib []byte
		for _, name := range []string{"core_cpus_list", "thread_siblings_list"} {
			if sib, err = fs.ReadFile(fsys, path.Join(e.Name(), "topology", name)); err == nil {
				break
			}
		}
		if err != nil {
			continue // an offline CPU has no topology folder
		}
		logical++
		cores[strings.TrimSpace(string(sib))] = true
	}
	if logical == 0 {
		return 0, 0, fmt.Errorf("sysfs cpu: no topology found")
	}
	return len(cores), logical, nil
}

// parseCPUList reads the kernel's CPU list format: "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if a < 0 || b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// performanceCoresFromSysfs counts the physical P-cores of a hybrid Intel CPU: the kernel
// lists the two kinds in /sys/devices/cpu_core/cpus and /sys/devices/cpu_atom/cpus. devices is
// /sys/devices and cpus /sys/devices/system/cpu. It returns 0 for a CPU that is not hybrid.
func performanceCoresFromSysfs(devices, cpus fs.FS) int {
	if _, err := fs.Stat(devices, "cpu_atom/cpus"); err != nil {
		return 0
	}
	b, err := fs.ReadFile(devices, "cpu_core/cpus")
	if err != nil {
		return 0
	}
	list, err := parseCPUList(string(b))
	if err != nil {
		return 0
	}
	cores := map[string]bool{}
	for _, c := range list {
		sib, err := fs.ReadFile(cpus, fmt.Sprintf("cpu%d/topology/core_cpus_list", c))
		if err != nil {
			sib = []byte(strconv.Itoa(c)) // no topology: count the CPU as its own core
		}
		cores[strings.TrimSpace(string(sib))] = true
	}
	return len(cores)
}

// relationProcessorCore is LOGICAL_PROCESSOR_RELATIONSHIP's RelationProcessorCore.
const relationProcessorCore = 0

// parseProcessorCores walks the buffer GetLogicalProcessorInformationEx(RelationProcessorCore)
// fills on 64-bit Windows: records of {Relationship uint32, Size uint32, PROCESSOR_RELATIONSHIP}
// where PROCESSOR_RELATIONSHIP is {Flags, EfficiencyClass byte, Reserved [20]byte,
// GroupCount uint16, GroupMask [GroupCount]{Mask uint64, Group uint16, Reserved [3]uint16}}.
// Each record is one physical core; the bits of its masks are its logical processors. On a
// hybrid CPU the fast cores have the highest EfficiencyClass; performance counts them (0 when
// all cores are alike). It is plain parsing, kept OS-independent so it is tested everywhere.
func parseProcessorCores(buf []byte) (physical, logical, performance int, err error) {
	classes := map[byte]int{}
	var top byte
	const groupsAt, maskSize = 32, 16
	for off := 0; off < len(buf); {
		if len(buf)-off < groupsAt {
			return 0, 0, 0, fmt.Errorf("processor info: truncated record at offset %d", off)
		}
		rel := binary.LittleEndian.Uint32(buf[off:])
		size := int(binary.LittleEndian.Uint32(buf[off+4:]))
		if size < groupsAt || off+size > len(buf) {
			return 0, 0, 0, fmt.Errorf("processor info: record at offset %d has bad size %d", off, size)
		}
		if rel == relationProcessorCore {
			groups := int(binary.LittleEndian.Uint16(buf[off+30:]))
			if groupsAt+groups*maskSize > size {
				return 0, 0, 0, fmt.Errorf("processor info: record at offset %d: %d groups do not fit in %d bytes", off, groups, size)
			}
			physical++
			class := buf[off+9]
			classes[class]++
			top = max(top, class)
			for g := 0; g < groups; g++ {
				logical += bits.OnesCount64(binary.LittleEndian.Uint64(buf[off+groupsAt+g*maskSize:]))
			}
		}
		off += size
	}
	if physical == 0 {
		return 0, 0, 0, fmt.Errorf("processor info: no processor core records")
	}
	if len(classes) > 1 {
		performance = classes[top]
	}
	return physical, logical, performance, nil
}
