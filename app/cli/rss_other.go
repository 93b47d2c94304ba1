//go:build !linux && !windows

package cli

// peakRSS is unknown on this OS.
func peakRSS() int64 { return 0 }

// diskReadBytes is unknown here.
func diskReadBytes() int64 { return 0 }
