package platform

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MapReadOnly maps the first size bytes of f read-only and shared, so the pages come from
// the page cache and are never copied into private memory. The mapping outlives f; call
// the returned unmap once when done with the bytes.
func MapReadOnly(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("map %s: size %d is not positive", f.Name(), size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %d bytes: %w", f.Name(), size, err)
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
