package quant

// Q2_K: 256 values in 16 groups of 16. scales[16] (low nibble: 4-bit scale, high nibble:
// 4-bit min), qs[64] of 2-bit quants, fp16 d and dmin; x = d*scale*q - dmin*min.
// Each 128-value half uses 32 bytes of qs: value 32*s + l of the half is bits 2s..2s+1 of
// byte l.

func dequantRowQ2_K(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[84]byte)(src[i*84:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := halfAt(b[:], 80), halfAt(b[:], 82)
		sc := b[0:16]
		n, is := 0, 0
		for half := 0; half < 2; half++ {
			q := b[16+32*half : 16+32*half+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for g := 0; g < 2; g++ {
					s := sc[is]
					is++
					dl := d * float32(s&0x0f)
					ml := dmin * float32(s>>4)
					for l := 0; l < 16; l++ {
						y[n] = float32(dl*float32((q[16*g+l]>>shift)&3)) - ml
						n++
					}
				}
			}
		}
	}
}

// quantRowQ2_K follows quantize_row_q2_K_ref: per 16 values a scale+min search under
// absolute error (makeQKX2Quants with weights |x|), 4-bit scales and mins relative to the
// block's largest, quants recomputed against the rounded scales.
func quantRowQ2_K(src []float32, dst []byte) {
	const q4scale = 15
	for i := range len(src) / QK_K {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[84]byte)(dst[i*84:])
		var (
			L       [QK_K]uint8
			laux    [16]uint8
			weights [16]float32
			scales  [16]float32
			mins    [16]float32
		)
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = absF32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			maxScale = max(maxScale, scales[j])
			maxMin = max(maxMin, mins[j])
		}
		clear(b[:])
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := 0; j < 16; j++ {
				b[j] = uint8(clampInt(nearestInt(iscale*scales[j]), 0, 15))
			}
			putHalf(b[:], 80, maxScale/q4scale)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := 0; j < 16; j++ {
				b[j] |= uint8(clampInt(nearestInt(iscale*mins[j]), 0, 15)) << 4
			}
			putHalf(b[:], 82, maxMin/q4scale)
		}
		d, dmin := halfAt(b[:], 80), halfAt(b[:], 82)
		for j := 0; j < 16; j++ {
			dj := d * float32(b[j]&0x0f)
			if dj == 0 {
				continue
			}
			dm := dmin * float32(b[j]>>4)
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = uint8(clampInt(nearestInt((x[16*j+ii]+dm)/dj), 0, 3))
			}
		}
		for half := 0; half < 2; half++ {
			Lh := L[128*half : 128*half+128]
			for l := 0; l < 32; l++ {
				b[16+32*half+l] = Lh[l] | Lh[l+32]<<2 | Lh[l+64]<<4 | Lh[l+96]<<6
			}
		}
	}
}
