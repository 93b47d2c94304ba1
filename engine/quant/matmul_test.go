package quant

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/parallel"
)

// vdIntTypes are the weight types with integer kernels; vdFloatTypes are dotted in float.
func vdIntTypes() []Type {
	return []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS,
		IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S}
}

func vdFloatTypes() []Type { return []Type{F32, F16, BF16} }

// vdScaleOffsets gives the offsets of a block's fp16 scale fields, and of MXFP4's exponent
// byte (-1 when none), so random blocks can get sane scales.
func vdScaleOffsets(t Type) (halves []int, e8m0 int) {
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return []int{0}, -1
	case Q4_1, Q5_1, Q4_K, Q5_K:
		return []int{0, 2}, -1
	case Q2_K:
		return []int{80, 82}, -1
	case Q3_K:
		return []int{108}, -1
	case Q6_K:
		return []int{208}, -1
	case MXFP4:
		return nil, 0
	}
	return nil, -1
}

// vdRandomRows makes rows x cols random weights of type t: random bytes with scales of
// magnitude 0.01..1 (random sign) for block types, normal values for float types.
func vdRandomRows(t Type, rows, cols int, rng *rand.Rand) []byte {
	rb, err := RowBytes(t, cols)
	if err != nil {
		panic(err)
	}
	w := make([]byte, rows*rb)
	switch t {
	case F32:
		for j := 0; j < rows*cols; j++ {
			binary.LittleEndian.PutUint32(w[4*j:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return w
	case F16:
		for j := 0; j < rows*cols; j++ {
			binary.LittleEndian.PutUint16(w[2*j:], FP32ToFP16(float32(rng.NormFloat64())))
		}
		return w
	case BF16:
		for j := 0; j < rows*cols; j++ {
			binary.LittleEndian.PutUint16(w[2*j:], FP32ToBF16(float32(rng.NormFloat64())))
		}
		return w
	}
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	halves, e8m0 := vdScaleOffsets(t)
	bb := t.BlockBytes()
	for b := 0; b < len(w)/bb; b++ {
		blk := w[b*bb : (b+1)*bb]
		for _, off := range halves {
			s := float32(math.Pow(10, -2*rng.Float64()))
			if rng.IntN(2) == 0 {
				s = -s
			}
			binary.LittleEndian.PutUint16(blk[off:], FP32ToFP16(s))
		}
		if e8m0 >= 0 {
			blk[e8m0] = byte(118 + rng.IntN(13))
		}
	}
	return w
}

// vdRandomActs fills n rows of cols normal values (with a few large ones, as real
// activations have) into Activations for weight type t; it returns the floats too.
func vdRandomActs(t testing.TB, wt Type, cols, n int, rng *rand.Rand) (*Activations, []float32) {
	t.Helper()
	a, err := NewActivations(wt, cols, n)
	if err != nil {
		t.Fatalf("NewActivations(%s, %d, %d): %v", wt, cols, n, err)
	}
	xs := make([]float32, n*cols)
	for j := range xs {
		xs[j] = float32(rng.NormFloat64())
		if rng.IntN(64) == 0 {
			xs[j] *= 20
		}
	}
	for i := 0; i < n; i++ {
		if err := a.Set(i, xs[i*cols:(i+1)*cols]); err != nil {
			t.Fatal(err)
		}
	}
	return a, xs
}

func vdRMS(y []float32) float64 {
	var s float64
	for _, v := range y {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(max(len(y), 1)))
}

// TestMatMulFastPathMatchesReference: every x86 level this CPU has against the plain Go kernels,
// for every type with a native kernel and odd sizes.
func TestMatMulFastPathMatchesReference(t *testing.T) {
	levels := vdLevels()
	if len(levels) < 2 {
		t.Logf("only the generic kernels run on this CPU/build (%s); the fast path is not exercised", CPUFeatures())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, wt := range append(vdIntTypes(), vdFloatTypes()...) {
		colsList := []int{1, 3, 7}
		bs := wt.BlockSize()
		if bs == 1 {
			colsList = []int{1, 7, 8, 31, 33, 100, 257}
			bs = 1
		} else {
			for i := range colsList {
				colsList[i] *= bs
			}
		}
		for _, cols := range colsList {
			for _, rows := range []int{1, 5, 13} {
				for _, n := range []int{1, 2, 5} {
					w := vdRandomRows(wt, rows, cols, rng)
					a, _ := vdRandomActs(t, wt, cols, n, rng)
					rb, _ := RowBytes(wt, cols)
					ldy := rows + 3
					want := make([]float32, n*ldy)
					if err := vdMatMul(levelGeneric, wt, w, rb, a, want, ldy, 0, rows); err != nil {
						t.Fatal(err)
					}
					rms := vdRMS(want)
					for _, l := range levels[1:] {
						got := make([]float32, n*ldy)
						for k := range got {
							got[k] = 12345 // outside the written rows this must survive
						}
						// Two calls over split row ranges, as the pool does.
						mid := rows / 2
						if err := vdMatMul(l, wt, w, rb, a, got, ldy, 0, mid); err != nil {
							t.Fatal(err)
						}
						if err := vdMatMul(l, wt, w, rb, a, got, ldy, mid, rows); err != nil {
							t.Fatal(err)
						}
						for i := 0; i < n; i++ {
							for r := 0; r < ldy; r++ {
								g, e := got[i*ldy+r], want[i*ldy+r]
								if r >= rows {
									if g != 12345 {
										t.Fatalf("%s %s: wrote outside rows: y[%d,%d] = %g", wt, l, i, r, g)
									}
									continue
								}
								if d := math.Abs(float64(g - e)); d > 1e-5*(math.Abs(float64(e))+rms) || math.IsNaN(float64(g)) {
									t.Fatalf("%s %s cols=%d rows=%d n=%d: y[%d,%d] = %g, reference %g (rms %g)", wt, l, cols, rows, n, i, r, g, e, rms)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestMatMulAgainstFloat: the integer path (best level) against dequantised weights dotted
// in float with unquantised activations; the gap must be what 8-bit activations explain.
func TestMatMulAgainstFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, wt := range append(vdIntTypes(), vdFloatTypes()...) {
		cols := 3 * wt.BlockSize()
		if wt.BlockSize() == 1 {
			cols = 300
		}
		rows, n := 9, 5
		w := vdRandomRows(wt, rows, cols, rng)
		a, xs := vdRandomActs(t, wt, cols, n, rng)
		got := make([]float32, n*rows)
		want := make([]float32, n*rows)
		if err := MatMul(wt, w, cols, a, got, rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		if err := MatMulFloat(wt, w, cols, xs, n, want, rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		rb, _ := RowBytes(wt, cols)
		wf := make([]float32, cols)
		for r := 0; r < rows; r++ {
			if err := Dequantize(wt, w[r*rb:(r+1)*rb], wf); err != nil {
				t.Fatal(err)
			}
			wn := vdRMS(wf) * math.Sqrt(float64(cols))
			for i := 0; i < n; i++ {
				xn := vdRMS(xs[i*cols:(i+1)*cols]) * math.Sqrt(float64(cols))
				tol := 1e-2 * wn * xn
				if wt.BlockSize() == 1 {
					tol = 1e-5 * wn * xn // float activations: rounding only
				}
				if d := math.Abs(float64(got[i*rows+r] - want[i*rows+r])); d > tol || math.IsNaN(d) {
					t.Errorf("%s: y[%d,%d] = %g, float reference %g (|w| %g, |x| %g)", wt, i, r, got[i*rows+r], want[i*rows+r], wn, xn)
				}
			}
		}
	}
}

// TestMatMulFixtureRows dots the third-party reference blocks (gguf-py's decoding of them) with
// random activations, at every level, for every type in the fixtures that MatMul takes.
func TestMatMulFixtureRows(t *testing.T) {
	dir := fixtures.Path(t, "quants")
	raw, err := os.ReadFile(dir + "/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Types map[string]struct {
			BlockSize int `json:"block_size"`
			NValues   int `json:"n_values"`
		} `json:"types"`
	}
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	tested := 0
	for name, m := range man.Types {
		wt, err := ParseType(name)
		if err != nil || !matMulSupported(wt) {
			t.Logf("%s: not taken by MatMul (no kernel or dequantiser), not tested here", name)
			continue
		}
		bin, err1 := os.ReadFile(fmt.Sprintf("%s/%s.bin", dir, name))
		f32, err2 := os.ReadFile(fmt.Sprintf("%s/%s.f32", dir, name))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", name, err1, err2)
		}
		want := make([]float32, m.NValues)
		for j := range want {
			want[j] = math.Float32frombits(binary.LittleEndian.Uint32(f32[4*j:]))
		}
		rows := 4
		cols := m.NValues / rows
		if cols%max(m.BlockSize, 1) != 0 {
			rows, cols = 1, m.NValues
		}
		a, xs := vdRandomActs(t, wt, cols, 2, rng)
		// Values beyond 1e4 (F16's ±65504, BF16's ±3e38) would overflow: meet them with 0.
		for i := 0; i < 2; i++ {
			row := xs[i*cols : (i+1)*cols]
			for r := 0; r < rows; r++ {
				for j := range row {
					if math.Abs(float64(want[r*cols+j])) > 1e4 {
						row[j] = 0
					}
				}
			}
			if err := a.Set(i, row); err != nil {
				t.Fatal(err)
			}
		}
		rb, _ := RowBytes(wt, cols)
		for _, l := range vdLevels() {
			y := make([]float32, 2*rows)
			if err := vdMatMul(l, wt, bin, rb, a, y, rows, 0, rows); err != nil {
				t.Fatalf("%s %s: %v", name, l, err)
			}
			for i := 0; i < 2; i++ {
				ad := a.dequantRow(i)
				for r := 0; r < rows; r++ {
					var e, abs float64
					for j := 0; j < cols; j++ {
						p := float64(want[r*cols+j]) * float64(ad[j])
						e += p
						abs += math.Abs(p)
					}
					if d := math.Abs(float64(y[i*rows+r]) - e); d > 2e-6*abs || math.IsNaN(d) {
						t.Errorf("%s %s: row %d act %d: got %g, gguf-py values give %g (sum |terms| %g)", name, l, r, i, y[i*rows+r], e, abs)
					}
				}
			}
		}
		tested++
	}
	if tested == 0 {
		t.Fatal("no fixture type was tested")
	}
}

func TestMatMulActivationQuantisation(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, wt := range []Type{Q8_0, Q4_K, F16} {
		cols := 512
		a, xs := vdRandomActs(t, wt, cols, 3, rng)
		for i := 0; i < 3; i++ {
			got := a.dequantRow(i)
			for j := 0; j < cols; j++ {
				blk := j / a.block * a.block
				var amax float64
				for k := blk; k < blk+a.block; k++ {
					amax = max(amax, math.Abs(float64(xs[i*cols+k])))
				}
				if d := math.Abs(float64(got[j] - xs[i*cols+j])); d > amax/254*1.0001 {
					t.Fatalf("%s: row %d value %d: %g quantised to %g (block amax %g)", wt, i, j, xs[i*cols+j], got[j], amax)
				}
			}
			if a.kind == actFloat {
				continue
			}
			g := 32
			if a.kind == actQ8x256 {
				g = 16
			}
			for s := 0; s < cols/g; s++ {
				var sum int
				for j := s * g; j < (s+1)*g; j++ {
					sum += int(a.qs[i*cols+j])
				}
				if int(a.sums[i*cols/g+s]) != sum {
					t.Fatalf("%s: row %d group %d: sum %d, want %d", wt, i, s, a.sums[i*cols/g+s], sum)
				}
			}
		}
	}
	// An all-zero block quantises to zeros, not NaN.
	a, _ := NewActivations(Q8_0, 32, 1)
	if err := a.Set(0, make([]float32, 32)); err != nil {
		t.Fatal(err)
	}
	if a.d[0] != 0 || a.sums[0] != 0 {
		t.Fatalf("zero block: d=%g sum=%d", a.d[0], a.sums[0])
	}
	// A NaN or Inf activation makes the dot NaN at every level, as the float path would.
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		for _, wt := range []Type{Q8_0, Q4_K} {
			cols := wt.BlockSize()
			a, _ := NewActivations(wt, cols, 1)
			x := make([]float32, cols)
			x[3] = bad
			if err := a.Set(0, x); err != nil {
				t.Fatal(err)
			}
			w := vdRandomRows(wt, 1, cols, rand.New(rand.NewPCG(1, 1)))
			for _, l := range vdLevels() {
				y := []float32{0}
				rb, _ := RowBytes(wt, cols)
				if err := vdMatMul(l, wt, w, rb, a, y, 1, 0, 1); err != nil {
					t.Fatal(err)
				}
				if !math.IsNaN(float64(y[0])) {
					t.Errorf("%s %s: activation %g gave %g, want NaN", wt, l, bad, y[0])
				}
			}
		}
	}
}

func TestMatMulParallelEqualsSerial(t *testing.T) {
	p := parallel.NewPool(4)
	defer p.Close()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, wt := range []Type{Q4_K, Q8_0, F16} {
		rows, cols, n := 301, 512, 3
		w := vdRandomRows(wt, rows, cols, rng)
		a, _ := vdRandomActs(t, wt, cols, n, rng)
		want := make([]float32, n*rows)
		got := make([]float32, n*rows)
		if err := MatMul(wt, w, cols, a, want, rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		if err := MatMulParallel(p, wt, w, rows, cols, a, got, rows); err != nil {
			t.Fatal(err)
		}
		for k := range want {
			if got[k] != want[k] {
				t.Fatalf("%s: y[%d] = %g parallel, %g serial", wt, k, got[k], want[k])
			}
		}
	}
}

func TestMatMulBadArgumentsAreErrors(t *testing.T) {
	if _, err := NewActivations(Q4_K, 100, 1); err == nil {
		t.Error("Q4_K with 100 columns: want an error")
	}
	if _, err := NewActivations(I32, 8, 1); err == nil {
		t.Error("I32 weights: want an error")
	}
	if _, err := NewActivations(Type(99), 32, 1); err == nil {
		t.Error("unknown type: want an error")
	}
	if _, err := NewActivations(Q8_0, 32, 0); err == nil {
		t.Error("n = 0: want an error")
	}
	a, err := NewActivations(Q8_0, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Set(2, make([]float32, 64)); err == nil {
		t.Error("Set row 2 of 2: want an error")
	}
	if err := a.Set(0, make([]float32, 63)); err == nil {
		t.Error("Set with 63 values: want an error")
	}
	w := make([]byte, 3*2*34) // 3 rows of 64 Q8_0 values
	y := make([]float32, 2*3)
	cases := []struct {
		name string
		call func() error
	}{
		{"type mismatch", func() error { return MatMul(Q4_0, w, 64, a, y, 3, 0, 3) }},
		{"cols mismatch", func() error { return MatMul(Q8_0, w, 32, a, y, 3, 0, 3) }},
		{"rows past weights", func() error { return MatMul(Q8_0, w, 64, a, y, 4, 0, 4) }},
		{"y too short", func() error { return MatMul(Q8_0, w, 64, a, y[:5], 3, 0, 3) }},
		{"overlapping outputs", func() error { return MatMul(Q8_0, w, 64, a, y, 1, 0, 3) }},
		{"negative range", func() error { return MatMul(Q8_0, w, 64, a, y, 3, 2, 1) }},
		{"nil activations", func() error { return MatMul(Q8_0, w, 64, nil, y, 3, 0, 3) }},
		{"parallel rows past weights", func() error { return MatMulParallel(parallel.NewPool(1), Q8_0, w, 4, 64, a, y, 4) }},
		{"float: xs too short", func() error { return MatMulFloat(Q8_0, w, 64, make([]float32, 100), 2, y, 3, 0, 3) }},
		{"float: bad cols", func() error { return MatMulFloat(Q8_0, w, 0, nil, 1, y, 3, 0, 3) }},
	}
	for _, c := range cases {
		if err := c.call(); err == nil {
			t.Errorf("%s: want an error", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	if err := MatMul(Q8_0, w, 64, a, y, 3, 0, 3); err != nil {
		t.Errorf("valid call: %v", err)
	}
}

func TestMatMulCPUFeatures(t *testing.T) {
	switch f := CPUFeatures(); f {
	case "avx512vnni", "avx2", "generic":
		t.Logf("kernel level: %s", f)
	default:
		t.Fatalf("CPUFeatures() = %q", f)
	}
}

// TestMatMulSetNativeEqualsGo: the x86 activation quantiser gives the same bytes as the Go
// one, on random rows, exact rounding ties, zeros, subnormals, NaN and Inf.
func TestMatMulSetNativeEqualsGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, block := range []int{32, QK_K} {
		cols := 3 * block
		rows := [][]float32{}
		for k := 0; k < 20; k++ {
			x := make([]float32, cols)
			for j := range x {
				x[j] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
			}
			rows = append(rows, x)
		}
		ties := make([]float32, cols) // amax 127 makes the scale 1: halves are exact ties
		for j := range ties {
			ties[j] = float32(j%20) - 9.5
		}
		ties[0], ties[block], ties[2*block] = 127, -127, 127
		special := make([]float32, cols)
		special[1] = 1e-42                     // block 0: subnormal only
		special[block+2] = float32(math.NaN()) // block 1: NaN
		special[2*block+3] = float32(math.Inf(-1))
		rows = append(rows, ties, special, make([]float32, cols))
		per := 1
		if block == QK_K {
			per = 16
		}
		for _, l := range vdLevels()[1:] {
			for ri, x := range rows {
				nb := cols / block
				q1, q2 := make([]int8, cols), make([]int8, cols)
				d1, d2 := make([]float32, nb), make([]float32, nb)
				s1, s2 := make([]int16, nb*per), make([]int16, nb*per)
				vdQuantizeRow(x, block, q1, d1, s1)
				if !vdQuantizeNative(l, x, block, q2, d2, s2) {
					t.Fatalf("%s: no native quantiser", l)
				}
				for b := range d1 {
					if math.Float32bits(d1[b]) != math.Float32bits(d2[b]) && !(d1[b] != d1[b] && d2[b] != d2[b]) {
						t.Fatalf("%s block %d row %d: scale %g (Go) vs %g (%s)", l, b, ri, d1[b], d2[b], l)
					}
				}
				for j := range q1 {
					if q1[j] != q2[j] {
						t.Fatalf("%s block %d row %d: value %d: %d (Go) vs %d", l, block, ri, j, q1[j], q2[j])
					}
				}
				for j := range s1 {
					if s1[j] != s2[j] {
						t.Fatalf("%s block %d row %d: sum %d: %d (Go) vs %d", l, block, ri, j, s1[j], s2[j])
					}
				}
			}
		}
	}
}

// TestMatMulMXFP4AllExponents: every E8M0 exponent from 0 (a float32 subnormal scale) to 200
// gives the reference's answer at every level (the x86 kernels decode it from a table).
func TestMatMulMXFP4AllExponents(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	const rows = 201
	w := vdRandomRows(MXFP4, rows, 32, rng)
	for r := 0; r < rows; r++ {
		w[r*17] = byte(r)
		for j := 1; j < 17; j++ {
			w[r*17+j] &= 0x77 // codes 0..7: non-negative values, so no cancellation blurs the check
		}
	}
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(rng.Float64() + 0.01)
	}
	a, err := NewActivations(MXFP4, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Set(0, x); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, rows)
	if err := vdMatMul(levelGeneric, MXFP4, w, 17, a, want, rows, 0, rows); err != nil {
		t.Fatal(err)
	}
	for _, l := range vdLevels()[1:] {
		got := make([]float32, rows)
		if err := vdMatMul(l, MXFP4, w, 17, a, got, rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		for r := range got {
			if d := math.Abs(float64(got[r] - want[r])); d > 1e-6*math.Abs(float64(want[r])) || math.IsNaN(d) {
				t.Errorf("%s: exponent %d: got %g, reference %g", l, r, got[r], want[r])
			}
		}
	}
}
