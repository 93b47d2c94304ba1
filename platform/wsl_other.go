//go:build !linux

package platform

// probeWSL: WSL2 is a Linux guest; a native Windows (or other) process is never inside it.
func probeWSL() WSL { return WSL{} }
