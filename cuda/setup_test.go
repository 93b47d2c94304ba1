package cuda_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"strata/cuda"
	"strata/engine/quant"
)

// gpu holds one device's context, a stream and the kernels for a test.
type gpu struct {
	ctx *cuda.Context
	s   *cuda.Stream
	k   *cuda.Kernels
}

// setup opens device 0 or skips where there is no driver. STRATA_CUDA_FATBIN names a
// freshly built fatbin to test instead of the embedded one.
func setup(t testing.TB) *gpu {
	t.Helper()
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no NVIDIA driver, skipping GPU test: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.NewContext(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	var k *cuda.Kernels
	if p := os.Getenv("STRATA_CUDA_FATBIN"); p != "" {
		img, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		k, err = ctx.LoadKernelsFrom(img)
		if err != nil {
			t.Fatal(err)
		}
	} else if k, err = ctx.LoadKernels(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Unload()
		_ = s.Destroy()
		_ = ctx.Close()
		d.Close()
	})
	return &gpu{ctx: ctx, s: s, k: k}
}

// buf allocates device memory freed at the end of the test, poisoned with 0xFF bytes
// (NaN as float32) so that unwritten outputs show.
func (g *gpu) buf(t testing.TB, bytes int) cuda.DevicePtr {
	t.Helper()
	p, err := g.ctx.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.ctx.Free(p) })
	if err := g.s.Memset(p, 0xFF, bytes); err != nil {
		t.Fatal(err)
	}
	return p
}

func upload[T any](t testing.TB, g *gpu, v []T) cuda.DevicePtr {
	t.Helper()
	var z T
	p := g.buf(t, len(v)*int(unsafe.Sizeof(z)))
	if err := cuda.Upload(g.s, p, v); err != nil {
		t.Fatal(err)
	}
	return p
}

func download[T any](t testing.TB, g *gpu, p cuda.DevicePtr, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := cuda.Download(g.s, out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

func randFloats(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r.Float64()*2 - 1) * scale)
	}
	return v
}

func toF16(v []float32) []uint16 {
	h := make([]uint16, len(v))
	for i, f := range v {
		h[i] = quant.FP32ToFP16(f)
	}
	return h
}

func fromF16(h []uint16) []float32 {
	v := make([]float32, len(h))
	for i, x := range h {
		v[i] = quant.FP16ToFP32(x)
	}
	return v
}

func norm(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func checkFinite(t testing.TB, what string, v []float32) {
	t.Helper()
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s[%d] = %v (unwritten or overflow)", what, i, x)
		}
	}
}
