//go:build !linux && !windows

package platform

import (
	"fmt"
	"io"
	"os"
)

// MapReadOnly reads the first size bytes of f into memory where Strata has no mapping
// code: correct, but a private copy rather than page-cache pages.
func MapReadOnly(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("map %s: size %d is not positive", f.Name(), size)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("map %s: read %d bytes: %w", f.Name(), size, err)
	}
	return b, func() error { return nil }, nil
}
