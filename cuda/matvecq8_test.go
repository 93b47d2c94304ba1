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
	t.Helper()
	rb := cuda.Q8RowBytes(cols)
	dx := upload(t, g, x)
	dq := g.buf(t, rows*rb)
	if err := g.k.QuantizeQ8(g.s, dx, dq, rows, cols); err != nil {
		t.Fatal(err)
	}
	raw := download[byte](t, g, dq, rows*rb)
	xh := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		row := raw[r*rb : (r+1)*rb]
		for grp := 0; grp < cols/32; grp++ {
			d := math.Float32frombits(binary.LittleEndian.Uint32(row[cols+4*grp:]))
			amax := 0.0
			for i := 0; i < 32; i++ {
				amax = math.Max(amax, math.Abs(float64(x[r*cols+grp*32+i])))
			}
			if math.Abs(float64(d)-amax/127) > 1e-6*amax {
				t.Fatalf("row %d group %d: scale %g, want max|x|/127 = %g", r, grp, d, amax/127)
			}
			for i := 0; i < 32; i++ {
				v := float32(int8(row[grp*32+i])) * d
				if math.Abs(float64(v-x[r*cols+grp*32+i])) > float64(d)/2*1.0001 {
					t.Fatalf("row %d value %d: %g quantised to %g (scale %g)", r, grp*32+i, x[r*cols+grp*32+i], v, d)
				}
				xh[r*cols+grp*32+i] = v
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
				dy := g.buf(t, 4*rows)
				if err := g.k.MatVecQ8(g.s, typ, dw, dq, dy, rows, cols); err != nil {
					t.Fatal(err)
				}
				got := download[float32](t, g, dy, rows)
				checkRows(t, "y", got, refMatVec(w, xh, rows, cols), w, xh, rows, cols, 1e-5)
			})
		}
		t.Run(fmt.Sprintf("%v/experts", typ), func(t *testing.T) {
			const nExp, rows = 5, 19
			cols := 2 * qk
			raw, w := makeWeights(t, r, typ, nExp*rows, cols)
			stride := len(raw) / nExp
			ids := []int32{3, 0, 3, 4}
			for _, perExpert := range []bool{false, true} {
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
