package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// checkGemm compares Y [n x m] with float64 X W^T, relative to ||x_i|| ||w_j||; X and W
// are given as the f16-rounded values the tensor cores multiply.
func checkGemm(t *testing.T, got []float32, x, w []float32, m, n, k int, tol float64) {
	t.Helper()
	checkFinite(t, "Y", got)
	for i := 0; i < n; i++ {
		xi := x[i*k : (i+1)*k]
		xn := norm(xi)
		for j := 0; j < m; j++ {
			wj := w[j*k : (j+1)*k]
			s := 0.0
			for c := 0; c < k; c++ {
				s += float64(xi[c]) * float64(wj[c])
			}
			if d := math.Abs(float64(got[i*m+j]) - s); d > tol*xn*norm(wj)+1e-30 {
				t.Fatalf("Y[%d][%d] = %g, want %g (|diff| %.3g)", i, j, got[i*m+j], s, d)
			}
		}
	}
}

func TestGemmF16(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ m, n, k int }{{64, 1, 64}, {100, 3, 96}, {129, 17, 136}, {70, 65, 264}, {256, 130, 1024}} {
		for _, xF16 := range []bool{false, true} {
			t.Run(fmt.Sprintf("m%d_n%d_k%d_xf16=%v", sh.m, sh.n, sh.k, xF16), func(t *testing.T) {
				wh := toF16(randFloats(r, sh.m*sh.k, 1))
				xs := randFloats(r, sh.n*sh.k, 1)
				xh := toF16(xs)
				dw := upload(t, g, wh)
				var dx cuda.DevicePtr
				if xF16 {
					dx = upload(t, g, xh)
				} else {
					dx = upload(t, g, xs)
				}
				dy := g.buf(t, 4*sh.m*sh.n)
				if err := g.k.GemmF16(g.s, dw, dx, xF16, dy, sh.m, sh.n, sh.k); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, sh.m*sh.n)
				checkGemm(t, got, fromF16(xh), fromF16(wh), sh.m, sh.n, sh.k, 1e-5)
			})
		}
	}
}

// TestGemmQuant runs the dequantise-then-GEMM path for every block type.
func TestGemmQuant(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range cuda.SupportedTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			m, n := 33, 5
			k := 2 * blockOf(typ)
			if k < 64 {
				k = 64
			}
			raw, w := makeWeights(t, r, typ, m, k)
			xs := randFloats(r, n*k, 1)
			dw, dx := upload(t, g, raw), upload(t, g, xs)
			dy := g.buf(t, 4*m*n)
			var scratch cuda.DevicePtr
			if b := cuda.GemmScratchBytes(typ, m, k); b > 0 {
				scratch = g.buf(t, b)
			}
			if err := g.k.Gemm(g.s, typ, dw, dx, dy, m, n, k, scratch); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, g, dy, m*n)
			checkGemm(t, got, fromF16(toF16(xs)), fromF16(toF16(w)), m, n, k, 1e-4)
		})
	}
}

// TestGemmQ runs the fused dequantising GEMM for every type at odd shapes.
func TestGemmQ(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, typ := range cuda.SupportedTypes() {
		for _, sh := range []struct{ m, n, blocks int }{{33, 5, 2}, {70, 65, 3}, {130, 1, 1}} {
			t.Run(fmt.Sprintf("%v/m%d_n%d", typ, sh.m, sh.n), func(t *testing.T) {
				k := sh.blocks * blockOf(typ)
				if blockOf(typ) == 8 {
					k = sh.blocks * 40
				}
				raw, w := makeWeights(t, r, typ, sh.m, k)
				xs := randFloats(r, sh.n*k, 1)
				dw, dx := upload(t, g, raw), upload(t, g, xs)
				dy := g.buf(t, 4*sh.m*sh.n)
				if err := g.k.GemmQ(g.s, typ, dw, dx, dy, sh.m, sh.n, k); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, sh.m*sh.n)
				checkGemm(t, got, fromF16(toF16(xs)), fromF16(toF16(w)), sh.m, sh.n, k, 1e-4)
			})
		}
	}
}

// TestGemmExperts checks the grouped MoE GEMM: slots of 5, 0, 70 and 1 rows, gathered
// tokens, experts in any order (one repeated).
func TestGemmExperts(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(43, 44))
	for _, typ := range cuda.SupportedTypes() {
		for _, blocks := range []int{1, 2} {
			t.Run(fmt.Sprintf("%v/%d-blocks", typ, blocks), func(t *testing.T) {
				const nExp, m, tokens = 6, 40, 90
				k := blocks * blockOf(typ)
				if k < 64 {
					k = 64
				}
				raw, w := makeWeights(t, r, typ, nExp*m, k)
				stride := len(raw) / nExp
				x := randFloats(r, tokens*k, 1)
				sizes := []int{5, 0, 70, 1}
				slotExpert, slotOff, rowIdx, _ := expertSlots(r, []int{4, 1, 0, 4}, sizes, tokens)
				dw, dx := upload(t, g, raw), upload(t, g, x)
				dse, dso, dri := upload(t, g, slotExpert), upload(t, g, slotOff), upload(t, g, rowIdx)
				dy := g.buf(t, 4*len(rowIdx)*m)
				if err := g.k.GemmExperts(g.s, typ, dw, stride, dse, dso, dri, len(sizes), 70, dx, dy, m, k); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, len(rowIdx)*m)
				checkExperts(t, got, fromF16(toF16(x)), fromF16(toF16(w)), slotExpert, slotOff, rowIdx, m, k, 1e-4)
			})
		}
	}
}

// expertSlots lays out a grouped GEMM's slots: slot i has sizes[i] rows on expert
// experts[i], each row a random one of tokens; maxRows is the largest slot.
func expertSlots(r *rand.Rand, experts, sizes []int, tokens int) (slotExpert, slotOff, rowIdx []int32, maxRows int) {
	slotOff = []int32{0}
	for i, sz := range sizes {
		slotExpert = append(slotExpert, int32(experts[i]))
		for range sz {
			rowIdx = append(rowIdx, int32(r.IntN(tokens)))
		}
		slotOff = append(slotOff, int32(len(rowIdx)))
		maxRows = max(maxRows, sz)
	}
	return slotExpert, slotOff, rowIdx, maxRows
}

// checkExperts compares each slot's rows of got [rows x m] with float64 products of its
// expert's m x k block of w and the row's token of x (tokens x k).
func checkExperts(t *testing.T, got, x, w []float32, slotExpert, slotOff, rowIdx []int32, m, k int, tol float64) {
	t.Helper()
	for e := range slotExpert {
		we := w[int(slotExpert[e])*m*k : (int(slotExpert[e])+1)*m*k]
		for row := int(slotOff[e]); row < int(slotOff[e+1]); row++ {
			xr := x[int(rowIdx[row])*k : (int(rowIdx[row])+1)*k]
			checkGemm(t, got[row*m:(row+1)*m], xr, we, m, 1, k, tol)
		}
	}
}

// TestGemmQ8 runs the integer tensor-core GEMM for every type that has it, at odd shapes:
// a k-stage cut short (3 groups of 32), 5 rows (32-token tiles) and 65 (64-token tiles,
// two of them), against float64 products of the weights and the quantised activations.
func TestGemmQ8(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(45, 46))
	for _, typ := range cuda.SupportedTypes() {
		if !typ.HasGemmQ8() {
			continue
		}
		for _, sh := range []struct{ m, n, blocks int }{{33, 5, 2}, {70, 65, 3}, {130, 1, 1}, {64, 48, 9}} {
			t.Run(fmt.Sprintf("%v/m%d_n%d_b%d", typ, sh.m, sh.n, sh.blocks), func(t *testing.T) {
				k := sh.blocks * blockOf(typ)
				raw, w := makeWeights(t, r, typ, sh.m, k)
				dq, xh := quantizedRows(t, g, randFloats(r, sh.n*k, 1), sh.n, k, true)
				dw := upload(t, g, raw)
				dy := g.buf(t, 4*sh.m*sh.n)
				if err := g.k.GemmQ8(g.s, typ, dw, dq, dy, sh.m, sh.n, k); err != nil {
					t.Fatal(err)
				}
				checkGemm(t, download[float32](t, g, dy, sh.m*sh.n), xh, w, sh.m, sh.n, k, 1e-5)
			})
		}
	}
}

// TestGemmExpertsQ8 checks the grouped form: slots of 5, 0, 70 and 1 rows (32-token tiles)
// and of 60 and 70 (64-token tiles), gathered tokens, experts in any order (one repeated).
func TestGemmExpertsQ8(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(47, 48))
	for _, typ := range cuda.SupportedTypes() {
		if !typ.HasGemmQ8() {
			continue
		}
		for _, c := range []struct {
			experts, sizes []int
			blocks         int
		}{{[]int{4, 1, 0, 4}, []int{5, 0, 70, 1}, 1}, {[]int{2, 5}, []int{60, 70}, 2}} {
			t.Run(fmt.Sprintf("%v/%v", typ, c.sizes), func(t *testing.T) {
				const nExp, m, tokens = 6, 40, 90
				k := c.blocks * blockOf(typ)
				if k < 64 {
					k = 64
				}
				raw, w := makeWeights(t, r, typ, nExp*m, k)
				stride := len(raw) / nExp
				dq, xh := quantizedRows(t, g, randFloats(r, tokens*k, 1), tokens, k, true)
				slotExpert, slotOff, rowIdx, maxRows := expertSlots(r, c.experts, c.sizes, tokens)
				dw := upload(t, g, raw)
				dse, dso, dri := upload(t, g, slotExpert), upload(t, g, slotOff), upload(t, g, rowIdx)
				dy := g.buf(t, 4*len(rowIdx)*m)
				if err := g.k.GemmExpertsQ8(g.s, typ, dw, stride, dse, dso, dri, len(c.sizes), maxRows, len(rowIdx), dq, dy, m, k); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, len(rowIdx)*m)
				checkExperts(t, got, xh, w, slotExpert, slotOff, rowIdx, m, k, 1e-5)
			})
		}
	}
}

// TestGemmQ8Refuses: types without the kernel, k not whole groups, misaligned Q4_K.
func TestGemmQ8Refuses(t *testing.T) {
	g := setup(t)
	buf := g.buf(t, 1<<16)
	for _, c := range []struct {
		name string
		err  func() error
	}{
		{"iq3_xxs", func() error { return g.k.GemmQ8(g.s, cuda.IQ3_XXS, buf, buf, buf, 8, 8, 256) }},
		{"k=48", func() error { return g.k.GemmQ8(g.s, cuda.Q8_0, buf, buf, buf, 8, 8, 48) }},
		{"misaligned q4_K", func() error { return g.k.GemmQ8(g.s, cuda.Q4_K, buf.Add(2), buf, buf, 8, 8, 256) }},
		{"no rows", func() error { return g.k.GemmQ8(g.s, cuda.Q8_0, buf, buf, buf, 8, 0, 64) }},
	} {
		if err := c.err(); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
