package cuda

import (
	"errors"
	"fmt"
	"testing"
)

func TestOutOfMemoryIsTyped(t *testing.T) {
	oom := fmt.Errorf("gpu: upload: %w", &Error{Call: "cuMemAlloc(1048576 bytes)", Code: codeOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"})
	other := fmt.Errorf("gpu: %w", &Error{Call: "cuLaunchKernel", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"})
	if !errors.Is(oom, ErrOutOfMemory) || !IsOutOfMemory(oom) {
		t.Errorf("%v is not ErrOutOfMemory", oom)
	}
	if errors.Is(other, ErrOutOfMemory) || IsOutOfMemory(other) || errors.Is(oom, ErrNoDriver) {
		t.Errorf("%v matched the wrong kind", other)
	}
}
