//go:build unix

package gguf

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only and shared, so pages come from the page cache
// and are never copied into the process's private memory.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	b, err := unix.Mmap(int(fh.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
