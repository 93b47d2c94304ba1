package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"strata/cuda"
)

// quantizedX runs QuantizeQ8 on x [rows][cols], checks the quantisation and returns the
// values it represents (d * q), which the 8-bit matvec multiplies exactly.
func quantizedX(t *testing.T, g *gpu, x []float32, rows, cols int) (cuda.DevicePtr, []float32) {
	return quantizedRows(t, g, x, rows, cols, false)
}

// quantizedRows is quantizedX through QuantizeQ8 or, with sums, QuantizeQ8Sums, whose
// group sums (scale * sum of q) it checks too.
func quantizedRows(t *testing.T, g *gpu, x []float32, rows, cols int, sums bool) (cuda.DevicePtr, []float32) {
	t.Helper()
	rb, per := cuda.Q8RowBytes(cols), 4
	if sums {
		rb, per = cuda.Q8SumsRowBytes(cols), 8
	}
	dx := upload(t, g, x)
	dq := g.buf(t, rows*rb)
	quantize := g.k.QuantizeQ8
	if sums {
		quantize = g.k.QuantizeQ8Sums
	}
	if err := quantize(g.s, dx, dq, rows, cols); err != nil {
		t.Fatal(err)
	}
	raw := download[byte](t, g, dq, rows*rb)
	xh := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		row := raw[r*rb : (r+1)*rb]
		for grp := 0; grp < cols/32; grp++ {
			d := math.Float32frombits(binary.LittleEndian.Uint32(row[cols+per*grp:]))
			amax := 0.0
			for i := 0; i < 32; i++ {
				amax = math.Max(amax, math.Abs(float64(x[r*cols+grp*32+i])))
			}
			if math.Abs(float64(d)-amax/127) > 1e-6*amax {
				t.Fatalf("row %d group %d: scale %g, want max|x|/127 = %g", r, grp, d, amax/127)
			}
			sum := 0
			for i := 0; i < 32; i++ {
				q := int8(row[grp*32+i])
				sum += int(q)
				v := float32(q) * d
				if math.Abs(float64(v-x[r*cols+grp*32+i])) > float64(d)/2*1.0001 {
					t.Fatalf("row %d value %d: %g quantised to %g (scale %g)", r, grp*32+i, x[r*cols+grp*32+i], v, d)
				}
				xh[r*cols+grp*32+i] = v
			}
			if sums {
				got := math.Float32frombits(binary.LittleEndian.Uint32(row[cols+per*grp+4:]))
				if want := d * float32(sum); got != want {
					t.Fatalf("row %d group %d: sum %g, want scale x sum of q = %g", r, grp, got, want)
				}
			}
		}
	}
	return dq, xh
}

func TestMatVecQ8(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, typ := range cuda.SupportedTypes() {
		if !typ.HasQ8MatVec() {
			continue
		}
		qk := blockOf(typ)
		for _, sh := range []struct{ rows, blocks int }{{1, 1}, {17, 3}, {33, 8}, {130, 11}} {
			rows, cols := sh.rows, sh.blocks*qk
			t.Run(fmt.Sprintf("%v/%dx%d", typ, rows, cols), func(t *testing.T) {
				raw, w := makeWeights(t, r, typ, rows, cols)
				dq, xh := quantizedX(t, g, randFloats(r, cols, 1), 1, cols)
				dw := upload(t, g, raw)
				want := refMatVec(w, xh, rows, cols)
				defer g.k.SetRowsPerBlock(0)
				for _, rpb := range []int{0, 1, 2, 4} { // chosen per shape, then each
					g.k.SetRowsPerBlock(rpb)
					dy := g.buf(t, 4*rows)
					if err := g.k.MatVecQ8(g.s, typ, dw, dq, dy, rows, cols); err != nil {
						t.Fatal(err)
					}
					got := download[float32](t, g, dy, rows)
					checkRows(t, fmt.Sprintf("rows per block %d: y", rpb), got, want, w, xh, rows, cols, 1e-5)
				}
			})
		}
		t.Run(fmt.Sprintf("%v/experts", typ), func(t *testing.T) {
			const nExp, rows = 5, 19
			cols := 2 * qk
			raw, w := makeWeights(t, r, typ, nExp*rows, cols)
			stride := len(raw) / nExp
			ids := []int32{3, 0, 3, 4}
			defer g.k.SetRowsPerBlock(0)
			for i, perExpert := range []bool{false, true} {
				g.k.SetRowsPerBlock(2 * i) // chosen per shape, then 2 rows per block
				nx := 1
				if perExpert {
					nx = len(ids)
				}
				dq, xh := quantizedX(t, g, randFloats(r, nx*cols, 1), nx, cols)
				dw, dids := upload(t, g, raw), upload(t, g, ids)
				dy := g.buf(t, 4*rows*len(ids))
				if err := g.k.MatVecQ8Experts(g.s, typ, dw, stride, dids, len(ids), dq, perExpert, dy, rows, cols); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, rows*len(ids))
				for e, id := range ids {
					xe := xh[:cols]
					if perExpert {
						xe = xh[e*cols : (e+1)*cols]
					}
					we := w[int(id)*rows*cols : (int(id)+1)*rows*cols]
					checkRows(t, fmt.Sprintf("perExpert=%v slot %d", perExpert, e), got[e*rows:(e+1)*rows], refMatVec(we, xe, rows, cols), we, xe, rows, cols, 1e-5)
				}
			}
		})
	}
}

// TestMatVecsQ8 checks one launch of three products (q, k and v: different row counts,
// odd ones) with and without biases against three separate references, for every
// rows-per-block choice.
func TestMatVecsQ8(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(35, 36))
	defer g.k.SetRowsPerBlock(0)
	for _, typ := range []cuda.QuantType{cuda.Q4_K, cuda.Q8_0, cuda.MXFP4, cuda.Q6_K, cuda.IQ4_XS, cuda.Q5_K} {
		qk := blockOf(typ)
		cols := 3 * qk
		rows := []int{70, 13, 29}
		var outs []cuda.MatVecQ8Out
		var ws [][]float32
		var biases [][]float32
		dq, xh := quantizedX(t, g, randFloats(r, cols, 1), 1, cols)
		for i, n := range rows {
			raw, w := makeWeights(t, r, typ, n, cols)
			ws = append(ws, w)
			o := cuda.MatVecQ8Out{W: upload(t, g, raw), Rows: n}
			if i != 1 { // k without a bias, q and v with
				b := randFloats(r, n, 1)
				biases = append(biases, b)
				o.Bias = upload(t, g, b)
			} else {
				biases = append(biases, nil)
			}
			outs = append(outs, o)
		}
		for _, rpb := range []int{0, 1, 2, 4} {
			t.Run(fmt.Sprintf("%v/rpb%d", typ, rpb), func(t *testing.T) {
				g.k.SetRowsPerBlock(rpb)
				for n := 1; n <= 3; n++ { // q alone, q and k, all three
					for i := range outs[:n] {
						outs[i].Y = g.buf(t, 4*rows[i])
					}
					if err := g.k.MatVecsQ8(g.s, typ, dq, cols, outs[:n]...); err != nil {
						t.Fatal(err)
					}
					for i := range outs[:n] {
						want := refMatVec(ws[i], xh, rows[i], cols)
						for j := range want {
							if biases[i] != nil {
								want[j] += float64(biases[i][j])
							}
						}
						got := download[float32](t, g, outs[i].Y, rows[i])
						checkRows(t, fmt.Sprintf("%d products: product %d", n, i), got, want, ws[i], xh, rows[i], cols, 1e-5)
					}
				}
			})
		}
	}
	if err := g.k.MatVecsQ8(g.s, cuda.Q4_K, 0, 256); err == nil {
		t.Error("no products: no error")
	}
}

// TestMoEFused checks the fused gate/up/SwiGLU and down/combine kernels against the float64
// composition of the same steps.
func TestMoEFused(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(33, 34))
	for _, typ := range cuda.SupportedTypes() {
		if !typ.HasQ8MatVec() {
			continue
		}
		// The small shape, and one of the models' (hidden 2048 = 8 K-blocks, 3 blocks of ffn,
		// 8 of 16 experts).
		for _, sh := range []struct{ nExp, hiddenBlocks, ffn int }{{5, 2, 33}, {16, 8, 3 * 256}, {8, 1, 256}} {
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.hiddenBlocks, sh.ffn), func(t *testing.T) {
				nExp, ffn := sh.nExp, sh.ffn
				qk := blockOf(typ)
				hidden := sh.hiddenBlocks * qk
				ffnCols := qk // down's cols is the ffn size rounded to a block
				if ffnCols < ffn {
					ffnCols = ((ffn + qk - 1) / qk) * qk
				}
				rawG, wG := makeWeights(t, r, typ, nExp*ffnCols, hidden)
				rawU, wU := makeWeights(t, r, typ, nExp*ffnCols, hidden)
				rawD, wD := makeWeights(t, r, typ, nExp*hidden, ffnCols)
				ids := []int32{3, 0, 4}
				wts := []float32{0.5, 0.3, 0.2}
				if nExp > 8 {
					ids = []int32{15, 2, 9, 0, 7, 11, 4, 13}
					wts = []float32{0.2, 0.15, 0.15, 0.1, 0.1, 0.1, 0.1, 0.1}
				}
				dq, xh := quantizedX(t, g, randFloats(r, hidden, 1), 1, hidden)
				dg, du, dd := upload(t, g, rawG), upload(t, g, rawU), upload(t, g, rawD)
				dids, dwts := upload(t, g, ids), upload(t, g, wts)
				// plain, then with gpt-oss's extras: biases on all three products and the
				// clamped SwiGLU (a limit the products cross)
				defer g.k.SetRowsPerBlock(0)
				for _, run := range []struct {
					extra bool
					rpb   int
				}{{false, 0}, {true, 0}, {false, 1}, {true, 2}, {false, 4}} {
					extra := run.extra
					g.k.SetRowsPerBlock(run.rpb)
					var x cuda.MoEExtras
					var bg, bu, bd []float32
					limit, alpha := 0.0, 1.0
					if extra {
						bg, bu, bd = randFloats(r, nExp*ffnCols, 1), randFloats(r, nExp*ffnCols, 1), randFloats(r, nExp*hidden, 1)
						limit, alpha = 0.5, 1.702
						x = cuda.MoEExtras{Gate: upload(t, g, bg), Up: upload(t, g, bu), Stride: ffnCols, Limit: float32(limit), Alpha: float32(alpha)}
					}
					bias := func(b []float32, id, i, stride int) float64 {
						if b == nil {
							return 0
						}
						return float64(b[id*stride+i])
					}
					dh := g.buf(t, 4*len(ids)*ffnCols)
					if err := g.k.MoEGateUp(g.s, typ, dg, du, len(rawG)/nExp, dids, len(ids), dq, dh, ffnCols, hidden, x); err != nil {
						t.Fatal(err)
					}
					h := download[float32](t, g, dh, len(ids)*ffnCols)
					for e, id := range ids {
						we := func(w []float32) []float32 { return w[int(id)*ffnCols*hidden : (int(id)+1)*ffnCols*hidden] }
						gr, ur := refMatVec(we(wG), xh, ffnCols, hidden), refMatVec(we(wU), xh, ffnCols, hidden)
						for i := 0; i < ffnCols; i++ {
							gv, uv := gr[i]+bias(bg, int(id), i, ffnCols), ur[i]+bias(bu, int(id), i, ffnCols)
							want := gv / (1 + math.Exp(-gv)) * uv
							if extra {
								gv, uv = math.Min(gv, limit), math.Max(math.Min(uv, limit), -limit)
								want = gv / (1 + math.Exp(-alpha*gv)) * (uv + 1)
							}
							scale := norm(we(wG)[i*hidden:(i+1)*hidden])*norm(xh)*(math.Abs(uv)+1) + norm(we(wU)[i*hidden:(i+1)*hidden])*norm(xh)*(math.Abs(gv)+1)
							if d := math.Abs(float64(h[e*ffnCols+i]) - want); d > 1e-5*scale {
								t.Fatalf("extras %v, rows per block %d: gate/up slot %d row %d: got %g want %g", extra, run.rpb, e, i, h[e*ffnCols+i], want)
							}
						}
					}
					// down + combine + residual, on h quantised per slot
					dhq, hh := quantizedX(t, g, h, len(ids), ffnCols)
					resid := randFloats(r, hidden, 1)
					dy := upload(t, g, resid)
					xd := cuda.MoEExtras{}
					if extra {
						xd = cuda.MoEExtras{Down: upload(t, g, bd), Stride: hidden}
					}
					if err := g.k.MoEDown(g.s, typ, dd, len(rawD)/nExp, dids, dwts, len(ids), dhq, dy, hidden, ffnCols, xd); err != nil {
						t.Fatal(err)
					}
					got := download[float32](t, g, dy, hidden)
					for i := 0; i < hidden; i++ {
						want, scale := float64(resid[i]), 0.0
						for e, id := range ids {
							row := wD[(int(id)*hidden+i)*ffnCols : (int(id)*hidden+i+1)*ffnCols]
							he := hh[e*ffnCols : (e+1)*ffnCols]
							s := bias(bd, int(id), i, hidden)
							for c := range row {
								s += float64(row[c]) * float64(he[c])
							}
							want += float64(wts[e]) * s
							scale += norm(row) * norm(he)
						}
						if d := math.Abs(float64(got[i]) - want); d > 1e-5*scale+1e-6 {
							t.Fatalf("extras %v, rows per block %d: down row %d: got %g want %g", extra, run.rpb, i, got[i], want)
						}
					}
				}
			})
		}
	}
}

// TestMatVecBias checks the f32-activation matvec's bias (gpt-oss's router) against the
// reference plus the bias, on an odd row count.
func TestMatVecBias(t *testing.T) {
	g := setup(t)
	r := rand.New(rand.NewPCG(37, 38))
	for _, typ := range []cuda.QuantType{cuda.F32, cuda.Q4_K, cuda.MXFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			rows, cols := 37, 2*blockOf(typ)
			if blockOf(typ) == 8 {
				cols = 2880
			}
			raw, w := makeWeights(t, r, typ, rows, cols)
			x, bias := randFloats(r, cols, 1), randFloats(r, rows, 1)
			dy := g.buf(t, 4*rows)
			if err := g.k.MatVecBias(g.s, typ, upload(t, g, raw), upload(t, g, x), dy, upload(t, g, bias), rows, cols); err != nil {
				t.Fatal(err)
			}
			want := refMatVec(w, x, rows, cols)
			for i := range want {
				want[i] += float64(bias[i])
			}
			checkRows(t, "y", download[float32](t, g, dy, rows), want, w, x, rows, cols, 1e-5)
		})
	}
}
