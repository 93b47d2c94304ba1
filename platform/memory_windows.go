package platform

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// memoryStatusEx is MEMORYSTATUSEX; x/sys/windows does not wrap GlobalMemoryStatusEx.
type memoryStatusEx struct {
	length               uint32
	memoryLoad           uint32
	totalPhys            uint64
	availPhys            uint64
	totalPageFile        uint64
	availPageFile        uint64
	totalVirtual         uint64
	availVirtual         uint64
	availExtendedVirtual uint64
}

func probeMemory() (Memory, error) {
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")
	if err := proc.Find(); err != nil {
		return Memory{}, fmt.Errorf("memory: %w", err)
	}
	var st memoryStatusEx
	st.length = uint32(unsafe.Sizeof(st))
	if r, _, err := proc.Call(uintptr(unsafe.Pointer(&st))); r == 0 {
		return Memory{}, fmt.Errorf("memory: GlobalMemoryStatusEx: %w", err)
	}
	// availPhys counts the standby list, like Linux's MemAvailable counts the page cache.
	return Memory{TotalBytes: int64(st.totalPhys), AvailableBytes: int64(st.availPhys)}, nil
}
