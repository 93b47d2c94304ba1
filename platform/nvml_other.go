//go:build !windows && !(linux && cgo)

package platform

import (
	"errors"
	"fmt"
	"runtime"
)

func openNVML(bool) (nvmlAPI, error) {
	if runtime.GOOS == "linux" {
		return nil, errors.New("this build has no cgo, which the NVML loader needs")
	}
	return nil, fmt.Errorf("NVIDIA GPUs are not supported on %s", runtime.GOOS)
}
