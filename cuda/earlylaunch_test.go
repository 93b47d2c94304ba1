package cuda_test

import (
	"os"
	"testing"

	"strata/cuda"
)

// TestEarlyKernelsNamed: every kernel listed for early launches exists, so that a renamed
// kernel does not silently drop out of the list.
func TestEarlyKernelsNamed(t *testing.T) {
	if u := cuda.EarlyKernelsUnknown(); len(u) > 0 {
		t.Errorf("listed for early launches but no such kernel: %v", u)
	}
}

// TestEarlyLaunchChain queues a chain of in-place adds with no host wait between them: each
// launch may start before the one ahead ends (on sm_90 and later), and must still see that
// one's sums, or the total comes out short.
func TestEarlyLaunchChain(t *testing.T) {
	g := setup(t)
	d, err := cuda.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	info, err := d.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	wantEarly := info.Major >= 9 && os.Getenv("STRATA_PDL") != "0"
	if got := g.k.LaunchesEarly("add_f32"); got != wantEarly {
		t.Errorf("add_f32 launched early: %v on compute capability %d.%d, want %v", got, info.Major, info.Minor, wantEarly)
	}
	const n, rounds = 1 << 22, 64
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i % 1000)
	}
	dx, err := g.ctx.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	dy, err := g.ctx.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.ctx.Free(dx)
	defer g.ctx.Free(dy)
	if err := cuda.Upload(g.s, dx, x); err != nil {
		t.Fatal(err)
	}
	if err := cuda.Upload(g.s, dy, y); err != nil {
		t.Fatal(err)
	}
	for range rounds {
		if err := g.k.Add(g.s, dy, dx, dy, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := cuda.Download(g.s, y, dy); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if want := rounds * x[i]; y[i] != want {
			t.Fatalf("y[%d] = %g after %d adds, want %g", i, y[i], rounds, want)
		}
	}
}
