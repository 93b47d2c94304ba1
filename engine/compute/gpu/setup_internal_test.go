package gpu

import (
	"errors"
	"testing"
)

// newForTest opens the backend or skips where there is no NVIDIA driver (here; CI).
// STRATA_CUDA_FATBIN names a freshly built fatbin to run instead of the embedded one.
func newForTest(t testing.TB) *Backend {
	t.Helper()
	b, err := New(Options{})
	if errors.Is(err, ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// NewForTest is newForTest for the package's external tests.
func NewForTest(t *testing.T) *Backend {
	t.Helper()
	return newForTest(t)
}

// MailReads is how many routes b read from its route mail.
func MailReads(b *Backend) int { return b.mailReads }

// GraphReplays is how many segments b launched as a captured graph.
func GraphReplays(b *Backend) int { return b.step.Replays }
