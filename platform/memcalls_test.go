package platform

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"
)

func osCallsAvailable(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "windows" {
		t.Skip("the OS calls are implemented for Linux and Windows")
	}
}

func TestAlignedAlloc(t *testing.T) {
	osCallsAvailable(t)
	for _, tc := range []struct{ n, align int }{
		{1, 1}, {4096, 4096}, {10000, 4096}, {3 << 20, 64 << 10}, {5000, 2 << 20},
	} {
		if runtime.GOOS == "windows" && tc.align > 64<<10 {
			continue
		}
		b, err := AlignedAlloc(tc.n, tc.align)
		if err != nil {
			t.Fatalf("AlignedAlloc(%d, %d): %v", tc.n, tc.align, err)
		}
		if len(b) != tc.n || uintptr(unsafe.Pointer(&b[0]))%uintptr(tc.align) != 0 {
			t.Errorf("AlignedAlloc(%d, %d): len %d at %p", tc.n, tc.align, len(b), &b[0])
		}
		if b[0] != 0 || b[tc.n-1] != 0 {
			t.Errorf("AlignedAlloc(%d, %d): not zeroed", tc.n, tc.align)
		}
		for i := range b {
			b[i] = byte(i)
		}
		if err := FreeAligned(b); err != nil {
			t.Errorf("FreeAligned: %v", err)
		}
	}
	for _, bad := range []struct{ n, align int }{{0, 4096}, {-5, 4096}, {4096, 0}, {4096, 3000}} {
		if _, err := AlignedAlloc(bad.n, bad.align); err == nil {
			t.Errorf("AlignedAlloc(%d, %d): no error", bad.n, bad.align)
		}
	}
}

func TestLockMemory(t *testing.T) {
	osCallsAvailable(t)
	b, err := AlignedAlloc(16<<10, 4096) // within the smallest common RLIMIT_MEMLOCK
	if err != nil {
		t.Fatal(err)
	}
	defer FreeAligned(b)
	if err := LockMemory(b); err != nil {
		t.Fatalf("lock 16 KiB: %v", err)
	}
	b[100] = 7 // locked pages stay usable
	if err := UnlockMemory(b); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if err := LockMemory(nil); err != nil {
		t.Errorf("lock of nothing: %v", err)
	}
}

func TestAdviseOnAnUnalignedRange(t *testing.T) {
	osCallsAvailable(t)
	b, err := AlignedAlloc(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer FreeAligned(b)
	part := b[1000 : 300<<10] // neither end on a page boundary
	if err := AdviseWillNeed(part); err != nil {
		t.Errorf("will-need: %v", err)
	}
	if err := AdviseDontNeed(part); err != nil {
		t.Errorf("dont-need: %v", err)
	}
	if err := AdviseWillNeed(nil); err != nil {
		t.Errorf("will-need of nothing: %v", err)
	}
}

func TestPageSpan(t *testing.T) {
	page := uintptr(os.Getpagesize())
	b := make([]byte, 3*page)
	for _, tc := range []struct{ from, to int }{{0, 1}, {1, int(page)}, {int(page) - 1, int(page) + 1}, {5, 3 * int(page)}} {
		p, n := pageSpan(b[tc.from:tc.to])
		start := uintptr(unsafe.Pointer(&b[tc.from]))
		end := uintptr(unsafe.Pointer(&b[0])) + uintptr(tc.to)
		if uintptr(p)%page != 0 || n%page != 0 || uintptr(p) > start || uintptr(p)+n < end || n > uintptr(tc.to-tc.from)+2*page {
			t.Errorf("pageSpan[%d:%d] = %p+%d", tc.from, tc.to, p, n)
		}
	}
	if p, n := pageSpan(nil); p != nil || n != 0 {
		t.Errorf("pageSpan(nil) = %p+%d", p, n)
	}
}

func TestOpenUnbuffered(t *testing.T) {
	osCallsAvailable(t)
	dir := t.TempDir()
	want := make([]byte, 3*DirectIOAlign+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	path := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, align, err := OpenUnbuffered(path)
	if err != nil {
		t.Skipf("this filesystem refuses unbuffered reads: %v", err)
	}
	defer f.Close()
	if align != DirectIOAlign {
		t.Errorf("align %d", align)
	}
	buf, err := AlignedAlloc(2*align, align)
	if err != nil {
		t.Fatal(err)
	}
	defer FreeAligned(buf)
	n, err := f.ReadAt(buf, int64(align)) // aligned, and inside the file
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if n != len(buf) || !bytes.Equal(buf, want[align:3*align]) {
		t.Errorf("read %d bytes, want %d equal ones", n, len(buf))
	}
	if _, _, err := OpenUnbuffered(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestUnbufferedSupported(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(path, make([]byte, DirectIOAlign), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, err := OpenUnbuffered(path)
	if err == nil {
		f.Close()
	}
	if got := UnbufferedSupported(path); got != (err == nil) {
		t.Errorf("UnbufferedSupported = %v, but opening unbuffered gave %v", got, err)
	}
	if UnbufferedSupported(filepath.Join(dir, "missing")) {
		t.Error("a missing file counts as readable unbuffered")
	}
}
