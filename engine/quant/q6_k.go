package quant

// Q6_K: 256 values in 16 groups of 16. ql[128] low nibbles, qh[64] high 2 bits, 16 int8
// scales, fp16 d; x = d*scale*(q-32). Each 128-value half uses 64 bytes of ql and 32 of qh:
// value l (l < 32) of quarter k takes the low/high nibble of ql[l + 32*(k&1)] (high for
// k >= 2) and bits 2k..2k+1 of qh[l].

func dequantRowQ6_K(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[210]byte)(src[i*210:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 208)
		for half := 0; half < 2; half++ {
			ql := b[64*half : 64*half+64]
			qh := b[128+32*half : 128+32*half+32]
			sc := b[192+8*half : 192+8*half+8]
			out := y[128*half : 128*half+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int32((ql[l]&0x0f)|((qh[l]>>0)&3)<<4) - 32
				q2 := int32((ql[l+32]&0x0f)|((qh[l]>>2)&3)<<4) - 32
				q3 := int32((ql[l]>>4)|((qh[l]>>4)&3)<<4) - 32
				q4 := int32((ql[l+32]>>4)|((qh[l]>>6)&3)<<4) - 32
				out[l] = d * float32(int8(sc[is])) * float32(q1)
				out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

// quantRowQ6_K follows quantize_row_q6_K_ref: a symmetric search per group of 16
// (makeQXQuants), int8 scales relative to the largest, quants recomputed after rounding.
func quantRowQ6_K(src []float32, dst []byte) {
	for i := range len(src) / QK_K {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[210]byte)(dst[i*210:])
		var (
			L      [QK_K]uint8
			scales [16]float32
		)
		var maxScale, maxAbsScale float32
		for ib := 0; ib < 16; ib++ {
			s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := absF32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		clear(b[:])
		if maxAbsScale < groupMaxEps {
			continue // an all-zero block, d = 0
		}
		iscale := -128 / maxScale
		putHalf(b[:], 208, 1/iscale)
		for ib := 0; ib < 16; ib++ {
			b[192+ib] = uint8(int8(clampInt(nearestInt(iscale*scales[ib]), -128, 127)))
		}
		d := halfAt(b[:], 208)
		for j := 0; j < 16; j++ {
			dj := d * float32(int8(b[192+j]))
			if dj == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = uint8(clampInt(nearestInt(x[16*j+ii]/dj), -32, 31) + 32)
			}
		}
		for half := 0; half < 2; half++ {
			ql := b[64*half : 64*half+64]
			qh := b[128+32*half : 128+32*half+32]
			Lh := L[128*half : 128*half+128]
			for l := 0; l < 32; l++ {
				ql[l] = Lh[l]&0x0f | (Lh[l+64]&0x0f)<<4
				ql[l+32] = Lh[l+32]&0x0f | (Lh[l+96]&0x0f)<<4
				qh[l] = Lh[l]>>4 | (Lh[l+32]>>4)<<2 | (Lh[l+64]>>4)<<4 | (Lh[l+96]>>4)<<6
			}
		}
	}
}
