package platform

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// MapReadOnly maps the first size bytes of f read-only (CreateFileMapping + MapViewOfFile).
// The section handle is closed at once: the view keeps it and the file alive. Call the
// returned unmap once when done with the bytes.
func MapReadOnly(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("map %s: size %d is not positive", f.Name(), size)
	}
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY,
		uint32(uint64(size)>>32), uint32(uint64(size)), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: CreateFileMapping %d bytes: %w", f.Name(), size, err)
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	closeErr := windows.CloseHandle(h)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: MapViewOfFile %d bytes: %w", f.Name(), size, err)
	}
	if closeErr != nil {
		_ = windows.UnmapViewOfFile(addr)
		return nil, nil, fmt.Errorf("map %s: close section: %w", f.Name(), closeErr)
	}
	// addr is OS-managed memory, not a Go pointer; the indirection keeps vet's unsafeptr
	// check quiet about a legal conversion.
	b := unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), int(size))
	return b, func() error { return windows.UnmapViewOfFile(addr) }, nil
}
