package platform

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// diskSpace asks GetDiskFreeSpaceEx about the volume that holds dir.
func diskSpace(dir string) (free, total int64, fs string, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, "", fmt.Errorf("disk space %s: %w", dir, err)
	}
	var avail, tot, totFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &tot, &totFree); err != nil {
		return 0, 0, "", fmt.Errorf("GetDiskFreeSpaceEx %s: %w", dir, err)
	}
	return int64(avail), int64(tot), "", nil
}

// dropCache: Windows has no per-file way to drop cached pages; the probe then reports a
// buffered speed with that caveat.
func dropCache(*os.File, int64, int64) error {
	return fmt.Errorf("dropping cached pages: %w on Windows", errors.ErrUnsupported)
}
