package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"strata/cuda"
)

// TestRMSNorm covers the three forms of a row (norm.cu): short (one value a thread),
// vector (float4s, at 16-byte aligned addresses and, shifted by one float, not) and the
// strided loop (odd or long rows).
func TestRMSNorm(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range []struct {
		rows, dim     int
		weight, shift bool
	}{{3, 2048, true, false}, {1, 17, true, false}, {12, 128, true, false}, {5, 300, false, false}, {2, 2880, true, false},
		{1, 2880, true, true}, {2, 2052, false, false}, {1, 200, true, false}, {1, 8192, true, false}, {1, 8196, true, false}, {3, 4100, true, true}} {
		x := randFloats(r, sh.rows*sh.dim, 3)
		w := randFloats(r, sh.dim, 1)
		dx := uploadShifted(t, g, x, sh.shift)
		var dw = uploadShifted(t, g, w, sh.shift)
		if !sh.weight {
			dw = 0
		}
		const eps = 1e-6
		// in place: y = x
		if err := g.k.RMSNorm(g.s, dx, dw, dx, sh.rows, sh.dim, eps); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, g, dx, sh.rows*sh.dim)
		for i := 0; i < sh.rows; i++ {
			ss := 0.0
			for _, v := range x[i*sh.dim : (i+1)*sh.dim] {
				ss += float64(v) * float64(v)
			}
			sc := 1 / math.Sqrt(ss/float64(sh.dim)+eps)
			for j := 0; j < sh.dim; j++ {
				want := float64(x[i*sh.dim+j]) * sc
				if sh.weight {
					want *= float64(w[j])
				}
				if d := math.Abs(float64(got[i*sh.dim+j]) - want); d > 1e-5*(math.Abs(want)+1) || math.IsNaN(float64(got[i*sh.dim+j])) {
					t.Fatalf("rows=%d dim=%d shift=%v: y[%d][%d] = %g want %g", sh.rows, sh.dim, sh.shift, i, j, got[i*sh.dim+j], want)
				}
			}
		}
	}
}

// uploadShifted is upload, one float past a 16-byte boundary when shift is set.
func uploadShifted(t *testing.T, g *gpu, v []float32, shift bool) cuda.DevicePtr {
	t.Helper()
	if !shift {
		return upload(t, g, v)
	}
	p := g.buf(t, 4*(len(v)+1)).Add(4)
	if err := cuda.Upload(g.s, p, v); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRopeNeoX(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, sh := range []struct{ heads, hd, rd int }{{4, 128, 128}, {3, 64, 32}, {2, 256, 256}} {
		pos := []int32{0, 7, 4095}
		base := float32(1e6)
		n := len(pos) * sh.heads * sh.hd
		x := randFloats(r, n, 1)
		dx, dpos := upload(t, g, x), upload(t, g, pos)
		if err := g.k.RopeNeoX(g.s, dx, dpos, len(pos), sh.heads, sh.hd, sh.rd, base); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, g, dx, n)
		half := sh.rd / 2
		for tk, p := range pos {
			for h := 0; h < sh.heads; h++ {
				off := (tk*sh.heads + h) * sh.hd
				for i := 0; i < sh.hd; i++ {
					want := float64(x[off+i])
					if i < sh.rd {
						j := i % half
						// float32 angle, as the reference implementations compute it
						inv := float32(1 / math.Pow(float64(base), float64(2*j)/float64(sh.rd)))
						th := float64(float32(p) * inv)
						a, b := float64(x[off+j]), float64(x[off+j+half])
						if i < half {
							want = a*math.Cos(th) - b*math.Sin(th)
						} else {
							want = a*math.Sin(th) + b*math.Cos(th)
						}
					}
					if d := math.Abs(float64(got[off+i]) - want); d > 1e-3 {
						t.Fatalf("hd=%d rd=%d pos %d head %d dim %d: got %g want %g", sh.hd, sh.rd, p, h, i, got[off+i], want)
					}
				}
			}
		}
	}
}

// routeRef is the float64 reference of the router kernels on one token's logits: the k
// ids (ties to the lower id) and weights by mode.
func routeRef(l []float32, k int, mode cuda.RouteMode) ([]int, []float64) {
	n := len(l)
	key := make([]float64, n) // what is ranked: the probabilities, or the logits (top k first)
	sum := 0.0
	if mode == cuda.RouteTopKSoftmax {
		for i, v := range l {
			key[i] = float64(v)
		}
	} else {
		mx := math.Inf(-1)
		for _, v := range l {
			mx = math.Max(mx, float64(v))
		}
		for i, v := range l {
			key[i] = math.Exp(float64(v) - mx)
			sum += key[i]
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return key[order[a]] > key[order[b]] })
	ids, ws := order[:k], make([]float64, k)
	switch mode {
	case cuda.RouteTopKSoftmax:
		s := 0.0
		for j, e := range ids {
			ws[j] = math.Exp(key[e] - key[ids[0]])
			s += ws[j]
		}
		for j := range ws {
			ws[j] /= s
		}
	default:
		sel := 0.0
		for j, e := range ids {
			ws[j] = key[e] / sum
			sel += ws[j]
		}
		if mode == cuda.RouteSoftmaxNorm {
			for j := range ws {
				ws[j] /= sel
			}
		}
	}
	return ids, ws
}

// checkRoutes compares the kernels' ids (exactly) and weights with routeRef of each token.
func checkRoutes(t *testing.T, what string, logits []float32, ids []int32, ws []float32, tokens, nExp, k int, mode cuda.RouteMode) {
	t.Helper()
	for tk := range tokens {
		wantIDs, wantWs := routeRef(logits[tk*nExp:(tk+1)*nExp], k, mode)
		for j := range k {
			got, w := ids[tk*k+j], ws[tk*k+j]
			if int(got) != wantIDs[j] {
				t.Fatalf("%s experts=%d k=%d mode=%d token %d choice %d: expert %d, want %d", what, nExp, k, mode, tk, j, got, wantIDs[j])
			}
			if d := math.Abs(float64(w) - wantWs[j]); d > 1e-5*wantWs[j]+1e-7 || math.IsNaN(float64(w)) {
				t.Fatalf("%s experts=%d k=%d mode=%d token %d choice %d: weight %g want %g", what, nExp, k, mode, tk, j, w, wantWs[j])
			}
		}
	}
}

// TestRouterTopK: every mode against the reference, on expert counts of one slice, of
// several, and not a multiple of 32, with tied logits (a tie goes to the lower id).
func TestRouterTopK(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(15, 16))
	for _, sh := range []struct{ tokens, nExp, k int }{{3, 128, 8}, {1, 32, 4}, {5, 60, 1}, {2, 512, 10}, {1, 2048, 32}, {4, 8, 8}, {2, 256, 8}} {
		for _, mode := range []cuda.RouteMode{cuda.RouteSoftmax, cuda.RouteSoftmaxNorm, cuda.RouteTopKSoftmax} {
			logits := randFloats(r, sh.tokens*sh.nExp, 4)
			for tk := range sh.tokens { // ties: the top value twice, and a pair across slices
				row := logits[tk*sh.nExp : (tk+1)*sh.nExp]
				top := slices.Max(row)
				row[sh.nExp-1], row[sh.nExp/2] = top, top
				row[0] = row[sh.nExp/3+1]
			}
			dl := upload(t, g, logits)
			dids := g.buf(t, 4*sh.tokens*sh.k)
			dw := g.buf(t, 4*sh.tokens*sh.k)
			if err := g.k.RouterTopK(g.s, dl, dids, dw, sh.tokens, sh.nExp, sh.k, mode); err != nil {
				t.Fatal(err)
			}
			checkRoutes(t, "router_topk", logits, download[int32](t, g, dids, sh.tokens*sh.k), download[float32](t, g, dw, sh.tokens*sh.k), sh.tokens, sh.nExp, sh.k, mode)
		}
	}
	for _, bad := range []struct{ nExp, k int }{{8, 9}, {64, 33}, {cuda.MaxRouterExperts + 1, 8}, {0, 1}} {
		if err := g.k.RouterTopK(g.s, 0, 0, 0, 1, bad.nExp, bad.k, cuda.RouteSoftmax); err == nil {
			t.Errorf("experts=%d k=%d: no error", bad.nExp, bad.k)
		}
	}
}

// TestRouterF32: the one-launch decode router's logits against a float64 product (plus
// the bias), and its routing exactly as router_topk's reference routes those logits; two
// launches in a row share the counter (the first must leave it zero).
func TestRouterF32(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(19, 20))
	done := g.buf(t, 4)
	if err := g.s.Memset(done, 0, 4); err != nil {
		t.Fatal(err)
	}
	for _, sh := range []struct {
		cols, nExp, k int
		bias          bool
	}{{2048, 128, 8, false}, {2880, 32, 4, true}, {2048, 512, 10, false}, {148, 60, 4, true}, {64, 2048, 32, false}} {
		for _, mode := range []cuda.RouteMode{cuda.RouteSoftmax, cuda.RouteSoftmaxNorm, cuda.RouteTopKSoftmax} {
			x := randFloats(r, sh.cols, 1)
			w := randFloats(r, sh.nExp*sh.cols, 0.1)
			bias := randFloats(r, sh.nExp, 0.5)
			dx, dW, db := upload(t, g, x), upload(t, g, w), upload(t, g, bias)
			if !sh.bias {
				db = 0
			}
			dl := g.buf(t, 4*sh.nExp)
			for launch := range 2 {
				dids, dws := g.buf(t, 4*sh.k), g.buf(t, 4*sh.k)
				if err := g.k.RouterF32(g.s, dx, dW, db, dl, dids, dws, done, sh.cols, sh.nExp, sh.k, mode); err != nil {
					t.Fatal(err)
				}
				logits := download[float32](t, g, dl, sh.nExp)
				for e := range sh.nExp {
					want := 0.0
					for c := range sh.cols {
						want += float64(w[e*sh.cols+c]) * float64(x[c])
					}
					if sh.bias {
						want += float64(bias[e])
					}
					if d := math.Abs(float64(logits[e]) - want); d > 1e-5*(math.Abs(want)+1) || math.IsNaN(float64(logits[e])) {
						t.Fatalf("cols=%d experts=%d: logit %d = %g want %g", sh.cols, sh.nExp, e, logits[e], want)
					}
				}
				what := fmt.Sprintf("router_f32 cols=%d launch %d", sh.cols, launch)
				checkRoutes(t, what, logits, download[int32](t, g, dids, sh.k), download[float32](t, g, dws, sh.k), 1, sh.nExp, sh.k, mode)
			}
		}
	}
	if c := download[uint32](t, g, done, 1)[0]; c != 0 {
		t.Errorf("the counter is %d after the launches, want 0", c)
	}
	if cuda.RouterF32Fits(0, 0, 2050, 128, 8) || cuda.RouterF32Fits(4, 0, 2048, 128, 8) {
		t.Error("RouterF32Fits takes cols not a multiple of 4 or an unaligned x")
	}
}

func TestElementwise(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(17, 18))
	const n = 1000003
	a, b := randFloats(r, n, 5), randFloats(r, n, 5)
	da, db := upload(t, g, a), upload(t, g, b)
	dy := g.buf(t, 4*n)
	if err := g.k.SwiGLU(g.s, da, db, dy, n); err != nil {
		t.Fatal(err)
	}
	y := download[float32](t, g, dy, n)
	for i := range y {
		want := float64(a[i]) / (1 + math.Exp(-float64(a[i]))) * float64(b[i])
		if math.Abs(float64(y[i])-want) > 1e-5*(math.Abs(want)+1) {
			t.Fatalf("swiglu[%d] = %g want %g", i, y[i], want)
		}
	}
	if err := g.k.Add(g.s, da, db, dy, n); err != nil {
		t.Fatal(err)
	}
	y = download[float32](t, g, dy, n)
	for i := range y {
		if y[i] != a[i]+b[i] {
			t.Fatalf("add[%d] = %g want %g", i, y[i], a[i]+b[i])
		}
	}
	// y (= a+b) += w[2] * a
	w := []float32{0.5, -1, 0.25}
	dwt := upload(t, g, w)
	if err := g.k.ScaledAdd(g.s, dy, da, dwt, 2, n); err != nil {
		t.Fatal(err)
	}
	y = download[float32](t, g, dy, n)
	for i := range y {
		want := float64(a[i]+b[i]) + 0.25*float64(a[i])
		if math.Abs(float64(y[i])-want) > 1e-6*(math.Abs(want)+1) {
			t.Fatalf("scaled_add[%d] = %g want %g", i, y[i], want)
		}
	}
	// f32 -> f16
	dh := g.buf(t, 2*n)
	if err := g.k.F32ToF16(g.s, da, dh, n); err != nil {
		t.Fatal(err)
	}
	h := download[uint16](t, g, dh, n)
	wantH := toF16(a)
	for i := range h {
		if h[i] != wantH[i] {
			t.Fatalf("f32_to_f16[%d] = %#x want %#x", i, h[i], wantH[i])
		}
	}
}

func TestMoECombine(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(19, 20))
	const tokens, k, n = 3, 8, 2053
	x := randFloats(r, tokens*k*n, 1)
	w := randFloats(r, tokens*k, 1)
	y0 := randFloats(r, tokens*n, 1)
	for _, acc := range []bool{false, true} {
		dx, dw, dy := upload(t, g, x), upload(t, g, w), upload(t, g, y0)
		if err := g.k.MoECombine(g.s, dx, dw, dy, tokens, k, n, acc); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, g, dy, tokens*n)
		for tk := 0; tk < tokens; tk++ {
			for i := 0; i < n; i++ {
				want := 0.0
				if acc {
					want = float64(y0[tk*n+i])
				}
				for e := 0; e < k; e++ {
					want += float64(w[tk*k+e]) * float64(x[(tk*k+e)*n+i])
				}
				if math.Abs(float64(got[tk*n+i])-want) > 1e-5 {
					t.Fatalf("accumulate=%v token %d [%d] = %g want %g", acc, tk, i, got[tk*n+i], want)
				}
			}
		}
	}
}

// TestKVWrite stores rows at their positions, and at position % ring on a ring layer.
func TestKVWrite(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(21, 22))
	const ctxLen, row = 50, 4 * 128
	pos := []int32{7, 8, 49}
	for _, ring := range []int{0, 16} {
		src := randFloats(r, len(pos)*row, 2)
		cache := g.buf(t, 2*ctxLen*row)
		if err := g.s.Memset(cache, 0, 2*ctxLen*row); err != nil {
			t.Fatal(err)
		}
		dsrc, dpos := upload(t, g, src), upload(t, g, pos)
		if err := g.k.KVWrite(g.s, dsrc, cache, dpos, len(pos), row, ring); err != nil {
			t.Fatal(err)
		}
		got := download[uint16](t, g, cache, ctxLen*row)
		want := make([]uint16, ctxLen*row)
		for i, p := range pos {
			slot := int(p)
			if ring > 0 {
				slot %= ring
			}
			copy(want[slot*row:], toF16(src[i*row:(i+1)*row]))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("ring %d: cache[%d][%d] = %#x want %#x", ring, i/row, i%row, got[i], want[i])
			}
		}
	}
}
