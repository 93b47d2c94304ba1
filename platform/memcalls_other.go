//go:build !linux && !windows

package platform

import (
	"errors"
	"fmt"
	"os"
)

// On other systems the OS calls report errors.ErrUnsupported; callers fall back to plain
// memory and buffered reads.

func LockMemory([]byte) error      { return errors.ErrUnsupported }
func UnlockMemory([]byte) error    { return errors.ErrUnsupported }
func AdviseWillNeed([]byte) error  { return nil } // advice is optional
func AdviseDontNeed([]byte) error  { return nil }
func AdviseHugePages([]byte) error { return nil }
func PopulateRead([]byte) error    { return errors.ErrUnsupported }

func OpenUnbuffered(path string) (*os.File, int, error) {
	return nil, 0, fmt.Errorf("open unbuffered %s: %w", path, errors.ErrUnsupported)
}

func AlignedAlloc(n, align int) ([]byte, error) {
	return nil, fmt.Errorf("aligned alloc: %w", errors.ErrUnsupported)
}

func FreeAligned([]byte) error { return errors.ErrUnsupported }
