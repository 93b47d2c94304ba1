package cuda_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"strata/cuda"
)

func TestOpenWithoutDriverIsClear(t *testing.T) {
	d, err := cuda.Open()
	if err == nil {
		d.Close()
		t.Skip("a driver is present; the no-driver path is exercised on machines without one")
	}
	if !errors.Is(err, cuda.ErrNoDriver) || !strings.Contains(err.Error(), "no NVIDIA driver") {
		t.Fatalf("want a clear ErrNoDriver, got %v", err)
	}
}

func TestDevicesAndMemory(t *testing.T) {
	g := setup(t)
	d := g.ctx.Driver()
	devs, err := d.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 || devs[0].Name == "" || devs[0].Major < 7 || devs[0].TotalMemory == 0 {
		t.Fatalf("implausible device list %+v", devs)
	}
	v, err := d.Version()
	if err != nil || v < 11000 {
		t.Fatalf("driver version %d, %v", v, err)
	}
	free, total, err := g.ctx.MemInfo()
	if err != nil || free == 0 || free > total {
		t.Fatalf("MemInfo: free %d total %d err %v", free, total, err)
	}
	t.Logf("device 0: %+v, driver %d, free %d MiB", devs[0], v, free>>20)

	// an impossible allocation names the call and the CUDA error
	_, err = g.ctx.Alloc(1 << 52)
	if err == nil || !cuda.IsOutOfMemory(err) || !strings.Contains(err.Error(), "cuMemAlloc(4503599627370496 bytes): CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("huge Alloc: %v", err)
	}

	// round trip host -> device -> device -> host
	r := rand.New(rand.NewPCG(1, 1))
	src := randFloats(r, 12345, 1)
	a := upload(t, g, src)
	b := g.buf(t, 4*len(src))
	if err := g.s.CopyDevice(b, a, 4*len(src)); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, g, b, len(src))
	for i := range got {
		if got[i] != src[i] {
			t.Fatalf("round trip [%d] = %g want %g", i, got[i], src[i])
		}
	}
}

// TestPinnedZeroCopy has a kernel read its input straight from mapped pinned host memory.
func TestPinnedZeroCopy(t *testing.T) {
	g := setup(t)
	const n = 4096
	hb, err := g.ctx.HostAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	x := unsafe.Slice((*float32)(unsafe.Pointer(&hb.Bytes[0])), n)
	for i := range x {
		x[i] = float32(i)
	}
	y := g.buf(t, 4*n)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	d1 := upload(t, g, ones)
	if err := g.k.Add(g.s, hb.Dev, d1, y, n); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, g, y, n)
	for i := range got {
		if got[i] != float32(i)+1 {
			t.Fatalf("zero-copy add [%d] = %g", i, got[i])
		}
	}
}

// TestGraphReplay captures two launches and replays them; the graph reads a value that
// changes between replays from device memory, as a decode step reads its position.
func TestGraphReplay(t *testing.T) {
	g := setup(t)
	const n = 1000
	r := rand.New(rand.NewPCG(2, 2))
	a, b := randFloats(r, n, 1), randFloats(r, n, 1)
	da, db := upload(t, g, a), upload(t, g, b)
	dy := g.buf(t, 4*n)
	dw := upload(t, g, []float32{2})
	if err := g.s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := g.k.Add(g.s, da, db, dy, n); err != nil {
		t.Fatal(err)
	}
	if err := g.k.ScaledAdd(g.s, dy, da, dw, 0, n); err != nil {
		t.Fatal(err)
	}
	graph, err := g.s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Destroy()
	for _, w := range []float32{2, -3} {
		if err := cuda.Upload(g.s, dw, []float32{w}); err != nil {
			t.Fatal(err)
		}
		if err := graph.Launch(g.s); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, g, dy, n)
		for i := range got {
			want := a[i] + b[i] + w*a[i]
			if d := got[i] - want; d > 1e-6 || d < -1e-6 {
				t.Fatalf("w=%g: y[%d] = %g want %g", w, i, got[i], want)
			}
		}
	}
}
