package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// quantRowFunc encodes whole blocks: len(dst) is exactly the bytes of len(src) values.
type quantRowFunc func(src []float32, dst []byte)

func quantFunc(t Type) (quantRowFunc, bool) {
	switch t {
	case F32:
		return quantRowF32, true
	case F16:
		return quantRowF16, true
	case BF16:
		return quantRowBF16, true
	case Q4_0:
		return quantRowQ4_0, true
	case Q4_1:
		return quantRowQ4_1, true
	case Q5_0:
		return quantRowQ5_0, true
	case Q5_1:
		return quantRowQ5_1, true
	case Q8_0:
		return quantRowQ8_0, true
	case Q2_K:
		return quantRowQ2_K, true
	case Q3_K:
		return quantRowQ3_K, true
	case Q4_K:
		return quantRowQ4_K, true
	case Q5_K:
		return quantRowQ5_K, true
	case Q6_K:
		return quantRowQ6_K, true
	case IQ4_NL:
		return quantRowIQ4_NL, true
	case IQ4_XS:
		return quantRowIQ4_XS, true
	case IQ2_XXS:
		return quantRowIQ2_XXS, true
	case IQ2_XS:
		return quantRowIQ2_XS, true
	case IQ2_S:
		return quantRowIQ2_S, true
	case IQ3_XXS:
		return quantRowIQ3_XXS, true
	case IQ3_S:
		return quantRowIQ3_S, true
	case MXFP4:
		return quantRowMXFP4, true
	case NVFP4:
		return quantRowNVFP4, true
	case TQ1_0:
		return quantRowTQ1_0, true
	case TQ2_0:
		return quantRowTQ2_0, true
	}
	return nil, false
}

// CanQuantize reports whether Quantize encodes t.
func CanQuantize(t Type) bool { _, ok := quantFunc(t); return ok }

// QuantizesLikeGGML reports whether Quantize writes the bytes ggml's reference quantiser
// writes for t. The IQ2/IQ3 grid types have their own, simpler search (iq_quantize.go):
// valid blocks of comparable error, not ggml's bytes.
func QuantizesLikeGGML(t Type) bool {
	switch t {
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return false
	}
	return CanQuantize(t)
}

// Quantize encodes src (whole blocks) into dst (len == RowBytes(t, len(src))) with the
// algorithm of ggml's reference quantiser for t (see QuantizesLikeGGML for the exceptions).
func Quantize(t Type, src []float32, dst []byte) error {
	f, ok := quantFunc(t)
	if !ok {
		if !t.Known() {
			return fmt.Errorf("quant: quantize: unknown type id %d", uint32(t))
		}
		return fmt.Errorf("quant: quantize: type %s is not supported", t)
	}
	need, err := RowBytes(t, len(src))
	if err != nil {
		return fmt.Errorf("quant: quantize: %w", err)
	}
	if len(dst) != need {
		return fmt.Errorf("quant: quantize %s: %d values take %d bytes, dst has %d", t, len(src), need, len(dst))
	}
	f(src, dst)
	return nil
}

// groupMaxEps is ggml's GROUP_MAX_EPS: below it a group counts as all zeros.
const groupMaxEps = 1e-15

func putHalf(b []byte, off int, f float32) { binary.LittleEndian.PutUint16(b[off:], FP32ToFP16(f)) }

func absF32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

func minMaxF32(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

func clampInt(v, lo, hi int) int { return min(hi, max(lo, v)) }

// truncInt is C's float-to-int cast (toward zero); NaN and out-of-range values saturate
// instead of being undefined.
func truncInt(f float32) int {
	switch {
	case f != f:
		return 0
	case f >= 1<<30:
		return 1 << 30
	case f <= -(1 << 30):
		return -(1 << 30)
	}
	return int(f)
}

// truncOffset is trunc(x*id + off) with the product exact, as gguf-py computes Q4_0/Q5_0
// (in float64) and as a C build that fuses the multiply-add gets it.
func truncOffset(x, id float32, off float64) int {
	v := float64(x)*float64(id) + off // the float64 product of two float32 is exact
	switch {
	case v != v:
		return 0
	case v >= 1<<30:
		return 1 << 30
	case v <= -(1 << 30):
		return -(1 << 30)
	}
	return int(v)
}

// roundAway is C's roundf: halves away from zero.
func roundAway(f float32) int { return truncInt(float32(math.Round(float64(f)))) }

// nearestInt is ggml's nearest_int: round half to even by adding 1.5*2^23 in float32, so
// the integer lands in the low mantissa bits. Out of its range (and NaN) it saturates.
func nearestInt(f float32) int {
	if !(absF32(f) <= 4194303) {
		return truncInt(f)
	}
	return int(int32(math.Float32bits(float32(f)+12582912)&0x007fffff) - 0x00400000)
}

// makeQKX2Quants is ggml's make_qkx2_quants: fit x ~ scale*L + min (L in 0..nmax, min <= 0)
// minimising the weighted squared error (absolute error when useMAD), trying nstep+1 trial
// scales around nmax/(max-min). It returns the scale and -min.
func makeQKX2Quants(nmax int, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, negMin float32) {
	errOf := func(diff float32) float32 {
		if useMAD {
			return absF32(diff)
		}
		return diff * diff
	}
	n := len(x)
	vmin, vmax := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		vmin, vmax = min(vmin, x[i]), max(vmax, x[i])
		w := weights[i]
		sumW += w
		sumX += w * x[i]
	}
	if vmin > 0 {
		vmin = 0
	}
	if vmax == vmin {
		clear(L[:n])
		return 0, -vmin
	}
	iscale := float32(nmax) / (vmax - vmin)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := clampInt(nearestInt(iscale*(x[i]-vmin)), 0, nmax)
		L[i] = uint8(l)
		diff := scale*float32(l) + vmin - x[i]
		bestErr += weights[i] * errOf(diff)
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + rdelta*float32(is) + float32(nmax)) / (vmax - vmin)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(iscale*(x[i]-vmin)), 0, nmax)
			laux[i] = uint8(l)
			w := weights[i]
			sumL += w * float32(l)
			sumL2 += w * float32(l) * float32(l)
			sumXL += w * float32(l) * x[i]
		}
		D := sumW*sumL2 - sumL*sumL
		if D <= 0 {
			continue
		}
		thisScale := (sumW*sumXL - sumX*sumL) / D
		thisMin := (sumL2*sumX - sumL*sumXL) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curErr float32
		for i := 0; i < n; i++ {
			diff := thisScale*float32(laux[i]) + thisMin - x[i]
			curErr += weights[i] * errOf(diff)
		}
		if curErr < bestErr {
			copy(L[:n], laux[:n])
			bestErr, scale, vmin = curErr, thisScale, thisMin
		}
	}
	return scale, -vmin
}

// makeQXQuants is ggml's make_qx_quants with rmse_type=1 and no importance weights: a
// symmetric fit x ~ scale*(L-nmax), L in 0..2*nmax-1, weighted by x^2, trying 18 trial
// scales around -nmax/max.
func makeQXQuants(nmax int, x []float32, L []uint8) float32 {
	n := len(x)
	var vmax, amax float32
	for _, v := range x {
		if a := absF32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:n])
		return 0
	}
	iscale := -float32(nmax) / vmax
	var sumLX, sumL2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = uint8(l + nmax)
		w := v * v
		sumLX += w * v * float32(l)
		sumL2 += w * float32(l) * float32(l)
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + 0.1*float32(is)) / vmax
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
			w := v * v
			sumLX += w * v * float32(l)
			sumL2 += w * float32(l) * float32(l)
		}
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			for i, v := range x {
				L[i] = uint8(clampInt(nearestInt(iscale*v), -nmax, nmax-1) + nmax)
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: a symmetric fit x ~ scale*L with L in
// -nmax..nmax-1, weighted by x^2, then up to 5 rounds of moving single values to the level
// that most improves the fit. L is returned offset by nmax.
func makeQ3Quants(nmax int, x []float32, L []uint8) float32 {
	var vmax, amax float32
	for _, v := range x {
		if a := absF32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := -float32(nmax) / vmax
	var lv [16]int
	var sumLX, sumL2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		lv[i] = l
		w := v * v
		sumLX += w * v * float32(l)
		sumL2 += w * float32(l) * float32(l)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := v * v
			slx := sumLX - w*v*float32(lv[i])
			if slx <= 0 {
				continue
			}
			sl2 := sumL2 - w*float32(lv[i])*float32(lv[i])
			nl := clampInt(nearestInt(v*sl2/slx), -nmax, nmax-1)
			if nl == lv[i] {
				continue
			}
			slx += w * v * float32(nl)
			sl2 += w * float32(nl) * float32(nl)
			if sl2 > 0 && slx*slx*sumL2 > sumLX*sumLX*sl2 {
				lv[i], sumLX, sumL2 = nl, slx, sl2
				changed++
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] = uint8(lv[i] + nmax)
	}
	if sumL2 == 0 {
		return 0
	}
	return sumLX / sumL2
}
