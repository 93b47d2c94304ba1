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
