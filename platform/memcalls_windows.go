package platform

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// LockMemory pins b's pages in RAM (VirtualLock). Windows caps locked pages by the process's
// minimum working set, so when the cap is hit the working set is grown by len(b) and the lock
// retried.
func LockMemory(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	addr, n := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))
	err := windows.VirtualLock(addr, n)
	if errors.Is(err, windows.ERROR_WORKING_SET_QUOTA) {
		if gerr := growWorkingSet(n); gerr != nil {
			return fmt.Errorf("lock memory: %d bytes: %w (growing the working set: %v)", len(b), err, gerr)
		}
		err = windows.VirtualLock(addr, n)
	}
	if err != nil {
		return fmt.Errorf("lock memory: %d bytes: %w", len(b), err)
	}
	return nil
}

func growWorkingSet(by uintptr) error {
	proc := windows.CurrentProcess()
	var lo, hi uintptr
	var flags uint32
	windows.GetProcessWorkingSetSizeEx(proc, &lo, &hi, &flags)
	slack := uintptr(64 << 20)
	return windows.SetProcessWorkingSetSizeEx(proc, lo+by+slack, max(hi, lo+by+slack)+by, 0)
}

// UnlockMemory undoes LockMemory.
func UnlockMemory(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := windows.VirtualUnlock(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))); err != nil {
		return fmt.Errorf("unlock memory: %d bytes: %w", len(b), err)
	}
	return nil
}

// memoryRangeEntry is WIN32_MEMORY_RANGE_ENTRY.
type memoryRangeEntry struct {
	addr unsafe.Pointer
	n    uintptr
}

// AdviseWillNeed asks Windows to read b's pages of a file mapping in now
// (PrefetchVirtualMemory, Windows 8 and later).
func AdviseWillNeed(b []byte) error {
	p, n := pageSpan(b)
	if n == 0 {
		return nil
	}
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("PrefetchVirtualMemory")
	if err := proc.Find(); err != nil {
		return fmt.Errorf("advise will-need: %w", err)
	}
	entry := memoryRangeEntry{addr: p, n: n}
	if r, _, err := proc.Call(uintptr(windows.CurrentProcess()), 1, uintptr(unsafe.Pointer(&entry)), 0); r == 0 {
		return fmt.Errorf("advise will-need: %d bytes: %w", len(b), err)
	}
	return nil
}

// AdviseHugePages does nothing: Windows gives large pages only to memory allocated with
// MEM_LARGE_PAGES by a process holding SeLockMemoryPrivilege, which an ordinary user's
// process lacks, and never to memory that exists already.
func AdviseHugePages([]byte) error { return nil }

// PopulateRead reports errors.ErrUnsupported: Windows has no call that maps a view's pages
// into the working set without touching them (PrefetchVirtualMemory only reads them into
// the file cache), so callers touch them.
func PopulateRead([]byte) error { return errors.ErrUnsupported }

// AdviseDontNeed takes b's pages out of the working set. VirtualUnlock on pages that are not
// locked does exactly that (and reports ERROR_NOT_LOCKED); a file mapping's pages move to the
// standby list and come back from it or the file on the next touch.
func AdviseDontNeed(b []byte) error {
	p, n := pageSpan(b)
	if n == 0 {
		return nil
	}
	err := windows.VirtualUnlock(uintptr(p), n)
	if err != nil && !errors.Is(err, windows.ERROR_NOT_LOCKED) {
		return fmt.Errorf("advise dont-need: %d bytes: %w", len(b), err)
	}
	return nil
}

// OpenUnbuffered opens path for reading around the file cache (FILE_FLAG_NO_BUFFERING).
// Buffers, offsets and lengths must be multiples of the returned alignment (use AlignedAlloc),
// and reads should not run past the end of the file: os.File.ReadAt retries a short read at
// an unaligned offset, which fails with ERROR_INVALID_PARAMETER.
func OpenUnbuffered(path string) (f *os.File, align int, err error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, 0, fmt.Errorf("open unbuffered %s: %w", path, err)
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_NO_BUFFERING|windows.FILE_FLAG_SEQUENTIAL_SCAN, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open unbuffered %s: %w", path, err)
	}
	return os.NewFile(uintptr(h), path), DirectIOAlign, nil
}

// allocationGranularity is where VirtualAlloc places allocations: every 64 KiB.
const allocationGranularity = 64 << 10

// AlignedAlloc returns n bytes of zeroed memory outside the Go heap (VirtualAlloc) whose start
// is a multiple of align, a power of two up to 64 KiB. Free it with FreeAligned.
func AlignedAlloc(n, align int) ([]byte, error) {
	if err := checkAlign(n, align); err != nil {
		return nil, err
	}
	if align > allocationGranularity {
		return nil, fmt.Errorf("aligned alloc: alignment %d is above Windows' 64 KiB allocation granularity", align)
	}
	addr, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, fmt.Errorf("aligned alloc: VirtualAlloc %d bytes: %w", n, err)
	}
	// addr is memory Go does not manage, so turning it into a pointer is safe; the
	// indirection keeps vet's uintptr check quiet.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeAligned releases memory from AlignedAlloc; b must be the slice it returned.
func FreeAligned(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := windows.VirtualFree(uintptr(unsafe.Pointer(unsafe.SliceData(b))), 0, windows.MEM_RELEASE); err != nil {
		return fmt.Errorf("free aligned: %d bytes: %w", len(b), err)
	}
	return nil
}
