//go:build !unix && !windows

package gguf

import (
	"io"
	"os"
)

// mapFile reads the file into memory on platforms without mmap (wasm, plan9): correct,
// but it holds a private copy.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fh, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
