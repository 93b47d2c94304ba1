package platform

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LockMemory pins b's pages in RAM (mlock) so they are never paged out and a GPU can read
// them. The limit is RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK.
func LockMemory(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Mlock(b); err != nil {
		return fmt.Errorf("lock memory: %d bytes: %w", len(b), err)
	}
	return nil
}

// UnlockMemory undoes LockMemory.
func UnlockMemory(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Munlock(b); err != nil {
		return fmt.Errorf("unlock memory: %d bytes: %w", len(b), err)
	}
	return nil
}

// AdviseWillNeed asks the kernel to start reading b's pages of a file mapping in now.
func AdviseWillNeed(b []byte) error { return madvise(b, unix.MADV_WILLNEED, "will-need") }

// AdviseDontNeed tells the kernel b's pages can be dropped; a file mapping's pages are read
// again from the file (or the page cache) on the next touch.
func AdviseDontNeed(b []byte) error { return madvise(b, unix.MADV_DONTNEED, "dont-need") }

// AdviseHugePages asks for b's anonymous pages in 2 MiB transparent huge pages
// (MADV_HUGEPAGE), which most distributions grant only on request ("madvise" mode): the
// first touch of each faults in 512 times fewer pages, and the CPU, reading experts of a few
// MB each from random places in a large arena, misses the TLB far less. Kernels without
// transparent huge pages refuse it (EINVAL); it is advice, so callers may ignore that.
func AdviseHugePages(b []byte) error { return madvise(b, unix.MADV_HUGEPAGE, "huge pages") }

// PopulateRead maps b's pages of a file mapping into the process now, reading the ones the
// page cache lacks (MADV_POPULATE_READ, Linux 5.14), so later reads take no page faults. It
// reports errors.ErrUnsupported on older kernels.
func PopulateRead(b []byte) error {
	err := madvise(b, unix.MADV_POPULATE_READ, "populate-read")
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}

func madvise(b []byte, advice int, name string) error {
	p, n := pageSpan(b)
	if n == 0 {
		return nil
	}
	if err := unix.Madvise(unsafe.Slice((*byte)(p), n), advice); err != nil {
		return fmt.Errorf("advise %s: %d bytes: %w", name, len(b), err)
	}
	return nil
}

// OpenUnbuffered opens path for reading around the page cache (O_DIRECT). Buffers, offsets
// and lengths must be multiples of the returned alignment (use AlignedAlloc), and reads should
// not run past the end of the file: os.File.ReadAt retries a short read at an unaligned
// offset, which Windows refuses. Filesystems without direct I/O (tmpfs, some overlays) fail
// here with EINVAL.
func OpenUnbuffered(path string) (f *os.File, align int, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open unbuffered %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), DirectIOAlign, nil
}

// AlignedAlloc returns n bytes of zeroed anonymous memory outside the Go heap whose start is a
// multiple of align (a power of two). Free it with FreeAligned.
func AlignedAlloc(n, align int) ([]byte, error) {
	if err := checkAlign(n, align); err != nil {
		return nil, err
	}
	page := os.Getpagesize()
	extra := 0
	if align > page {
		extra = align // over-allocate, then cut the unaligned head and the tail away
	}
	total := uintptr(roundUp(n, page) + extra)
	p, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("aligned alloc: mmap %d bytes: %w", total, err)
	}
	if extra > 0 {
		head := (uintptr(align) - uintptr(p)%uintptr(align)) % uintptr(align)
		if head > 0 {
			if err := unix.MunmapPtr(p, head); err != nil {
				return nil, fmt.Errorf("aligned alloc: trim head: %w", err)
			}
		}
		p = unsafe.Add(p, int(head))
		body := uintptr(roundUp(n, page))
		if tail := total - head - body; tail > 0 {
			if err := unix.MunmapPtr(unsafe.Add(p, int(body)), tail); err != nil {
				return nil, fmt.Errorf("aligned alloc: trim tail: %w", err)
			}
		}
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeAligned releases memory from AlignedAlloc; b must be the slice it returned.
func FreeAligned(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		return fmt.Errorf("free aligned: %d bytes: %w", len(b), err)
	}
	return nil
}

// roundUp is n rounded up to a multiple of to.
func roundUp(n, to int) int { return (n + to - 1) / to * to }
