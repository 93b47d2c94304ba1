package platform

import (
	"fmt"
	"os"
	"unsafe"
)

// DirectIOAlign is the alignment OpenUnbuffered's files need for buffers, offsets and lengths:
// 4096 covers 512-byte and 4K-sector drives alike.
const DirectIOAlign = 4096

// pageSpan widens b to whole pages: the start rounded down, the end rounded up. The OS calls
// that take an address range (madvise, PrefetchVirtualMemory) want page-aligned starts.
func pageSpan(b []byte) (unsafe.Pointer, uintptr) {
	if len(b) == 0 {
		return nil, 0
	}
	page := uintptr(os.Getpagesize())
	p := unsafe.Pointer(unsafe.SliceData(b))
	head := uintptr(p) % page
	n := (head + uintptr(len(b)) + page - 1) / page * page
	return unsafe.Add(p, -int(head)), n
}

// checkAlign validates AlignedAlloc's arguments.
func checkAlign(n, align int) error {
	if n <= 0 {
		return fmt.Errorf("aligned alloc: size %d is not positive", n)
	}
	if align <= 0 || align&(align-1) != 0 {
		return fmt.Errorf("aligned alloc: alignment %d is not a power of two", align)
	}
	return nil
}

// UnbufferedSupported reports whether path's file system takes unbuffered reads (tmpfs and
// some overlays refuse them), by opening path that way.
func UnbufferedSupported(path string) bool {
	fh, _, err := OpenUnbuffered(path)
	if err != nil {
		return false
	}
	fh.Close()
	return true
}
