package platform

import "os"

func probeWSL() WSL {
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	_, dxgErr := os.Stat("/dev/dxg")
	w := detectWSL(string(rel), os.Getenv, dxgErr == nil)
	if err != nil {
		w.Reason = "kernel release unknown: " + err.Error()
	}
	return w
}
