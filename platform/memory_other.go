//go:build !linux && !windows

package platform

import (
	"errors"
	"fmt"
)

func probeMemory() (Memory, error) {
	return Memory{}, fmt.Errorf("memory: %w on this OS", errors.ErrUnsupported)
}
