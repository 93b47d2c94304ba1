//go:build !linux && !windows

package platform

import (
	"errors"
	"fmt"
	"os"
)

func diskSpace(dir string) (free, total int64, fs string, err error) {
	return 0, 0, "", fmt.Errorf("disk space %s: %w on this OS", dir, errors.ErrUnsupported)
}

func dropCache(*os.File, int64, int64) error { return errors.ErrUnsupported }
