package cuda_test

import (
	"errors"
	"slices"
	"testing"

	"strata/cuda"
)

// TestOwnContext: a context of its own beside the primary one on the same card keeps its own
// memory and stream (a value written in one is read back there, the other context's buffer
// untouched), says it is its own, and closes cleanly.
func TestOwnContext(t *testing.T) {
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no NVIDIA driver, skipping GPU test: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	prim, err := d.NewContext(0)
	if err != nil {
		t.Fatal(err)
	}
	defer prim.Close()
	own, err := d.NewOwnContext(0)
	if err != nil {
		t.Fatal(err)
	}
	if prim.Own() || !own.Own() {
		t.Errorf("primary says own %v, own context says %v", prim.Own(), own.Own())
	}
	var bufs []cuda.DevicePtr
	for i, c := range []*cuda.Context{prim, own} {
		s, err := c.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Alloc(16)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, p)
		if err := cuda.Upload(s, p, []int32{int32(i), 7, 8, 9}); err != nil {
			t.Fatal(err)
		}
		// the copy is queued: the download below runs on another stream, which does not wait
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		_ = s.Destroy()
	}
	for i, c := range []*cuda.Context{prim, own} {
		s, err := c.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int32, 4)
		if err := cuda.Download(s, got, bufs[i]); err != nil {
			t.Fatal(err)
		}
		if want := []int32{int32(i), 7, 8, 9}; !slices.Equal(got, want) {
			t.Errorf("context %d read %v, wrote %v", i, got, want)
		}
		_ = s.Destroy()
		if err := c.Free(bufs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := own.Close(); err != nil {
		t.Errorf("destroying the own context: %v", err)
	}
}
