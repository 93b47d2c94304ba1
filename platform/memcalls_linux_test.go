package platform

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux, MADV_DONTNEED on private anonymous memory really drops the pages: they read back
// as zeros. That shows the advice reached the kernel for the right range.
func TestAdviseDontNeedDropsAnonymousPages(t *testing.T) {
	page := os.Getpagesize()
	b, err := AlignedAlloc(4*page, page)
	if err != nil {
		t.Fatal(err)
	}
	defer FreeAligned(b)
	for i := range b {
		b[i] = 1
	}
	if err := AdviseDontNeed(b[page+10 : 2*page+10]); err != nil { // widened to pages 1 and 2
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   int
		want byte
	}{{0, 1}, {page - 1, 1}, {page, 0}, {2*page + 5, 0}, {3 * page, 1}} {
		if b[tc.at] != tc.want {
			t.Errorf("byte %d = %d, want %d", tc.at, b[tc.at], tc.want)
		}
	}
}

// The advice works on a file mapping, which is how the engine will use it.
func TestAdviseOnFileMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.bin")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if err := AdviseWillNeed(m[12345:700000]); err != nil {
		t.Fatal(err)
	}
	if err := AdviseDontNeed(m[12345:700000]); err != nil {
		t.Fatal(err)
	}
	if m[500000] != data[500000] { // read back from the file
		t.Errorf("mapping changed")
	}
}

// PopulateRead maps a file mapping's pages: the mapping's resident set (smaps Rss, which
// counts only pages mapped into this process) grows from none to the populated range.
func TestPopulateReadMapsPages(t *testing.T) {
	const size = 4 << 20
	path := filepath.Join(t.TempDir(), "m.bin")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	before := mappingRSS(t, m)
	if err := PopulateRead(m[:size/2]); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("this kernel has no MADV_POPULATE_READ: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	after := mappingRSS(t, m)
	if before != 0 || after < size/2 || after > size {
		t.Errorf("mapped bytes %d before, %d after populating %d", before, after, size/2)
	}
}

// mappingRSS is the Rss of the mapping that starts at m[0], from /proc/self/smaps.
func mappingRSS(t *testing.T, m []byte) int64 {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&m[0])))
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "Rss:"), "%d kB", &kb); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping at %s in smaps", start)
	return 0
}

// AdviseHugePages marks the mapping for transparent huge pages: /proc/self/smaps lists the
// advice as the "hg" flag of the mapping that holds the memory (whether 2 MiB pages are free
// to back it is up to the kernel, so the test checks the advice, not the pages).
func TestAdviseHugePagesMarksMapping(t *testing.T) {
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(b), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v)", b, err)
	}
	const size = 8 << 20
	b, err := AlignedAlloc(size, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer FreeAligned(b)
	at := uintptr(unsafe.Pointer(&b[0]))
	if flags := vmFlagsAt(t, at); strings.Contains(flags, " hg") {
		t.Fatalf("fresh memory already advised: %q", flags)
	}
	if err := AdviseHugePages(b); err != nil {
		t.Fatal(err)
	}
	if flags := vmFlagsAt(t, at); !strings.Contains(flags, " hg") {
		t.Errorf("VmFlags of the mapping at %#x = %q, want the hg (huge page) advice", at, flags)
	}
}

// vmFlagsAt returns the VmFlags line of the /proc/self/smaps mapping that holds address at.
func vmFlagsAt(t *testing.T, at uintptr) string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	inside := false
	for _, line := range strings.Split(string(smaps), "\n") {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			inside = at >= lo && at < hi
			continue
		}
		if inside && strings.HasPrefix(line, "VmFlags:") {
			return line
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", at)
	return ""
}
