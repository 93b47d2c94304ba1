package quant

// Q3_K: 256 values in 16 groups of 16. hmask[32] (the third bit, set means no -4 offset),
// qs[64] of low 2-bit quants laid out as in Q2_K, scales[12] packing 16 6-bit scales
// (offset by 32), fp16 d; x = d*(scale-32)*(q - 4*(1-hbit)).

// q3KScale unpacks scale k (0..15): the low 4 bits are nibble k/8 of byte k%8, the high
// 2 bits are bits 2*(k/4).. of byte 8 + k%4.
func q3KScale(sc []byte, k int) int32 {
	lo := (sc[k%8] >> (4 * uint(k/8))) & 0x0f
	hi := (sc[8+k%4] >> (2 * uint(k/4))) & 0x03
	return int32(lo|hi<<4) - 32
}

func dequantRowQ3_K(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[110]byte)(src[i*110:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 108)
		hm := b[0:32]
		sc := b[96:108]
		n, is := 0, 0
		hbit := uint(0) // the hmask bit of the current 32 values
		for half := 0; half < 2; half++ {
			q := b[32+32*half : 32+32*half+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for g := 0; g < 2; g++ {
					dl := d * float32(q3KScale(sc, is))
					is++
					for l := 0; l < 16; l++ {
						// A clear hmask bit means the value is 4 lower.
						v := int32((q[16*g+l]>>shift)&3) - 4 + 4*int32((hm[16*g+l]>>hbit)&1)
						y[n] = dl * float32(v)
						n++
					}
				}
				hbit++
			}
		}
	}
}

// quantRowQ3_K follows quantize_row_q3_K_ref: per 16 values a symmetric search
// (makeQ3Quants), 6-bit scales relative to the block's largest, quants recomputed against
// the rounded scales, the third bit moved to hmask.
func quantRowQ3_K(src []float32, dst []byte) {
	for i := range len(src) / QK_K {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[110]byte)(dst[i*110:])
		var (
			L      [QK_K]uint8
			scales [16]float32
		)
		var maxScale, amax float32
		for j := 0; j < 16; j++ {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if a := absF32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		clear(b[:])
		sc := b[96:108]
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < 16; j++ {
				l := uint8(clampInt(nearestInt(iscale*scales[j]), -32, 31) + 32)
				sc[j%8] |= (l & 0x0f) << (4 * uint(j/8))
				sc[8+j%4] |= (l >> 4) << (2 * uint(j/4))
			}
			putHalf(b[:], 108, 1/iscale)
		}
		d := halfAt(b[:], 108)
		for j := 0; j < 16; j++ {
			dj := d * float32(q3KScale(sc, j))
			if dj == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = uint8(clampInt(nearestInt(x[16*j+ii]/dj), -4, 3) + 4)
			}
		}
		hm := b[0:32]
		for j := 0; j < QK_K; j++ {
			if L[j] > 3 {
				hm[j%32] |= 1 << uint(j/32)
				L[j] -= 4
			}
		}
		for half := 0; half < 2; half++ {
			Lh := L[128*half : 128*half+128]
			for l := 0; l < 32; l++ {
				b[32+32*half+l] = Lh[l] | Lh[l+32]<<2 | Lh[l+64]<<4 | Lh[l+96]<<6
			}
		}
	}
}
