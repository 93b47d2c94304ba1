package platform

import (
	"os"
	"path/filepath"
	"testing"

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
