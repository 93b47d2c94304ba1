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
		m := uint8(1)
		for half := 0; half < 2; half++ {
			q := b[32+32*half : 32+32*half+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for g := 0; g < 2; g++ {
					dl := d * float32(q3KScale(sc, is))
					is++
					for l := 0; l < 16; l++ {
						v := int32((q[16*g+l] >> shift) & 3)
						if hm[16*g+l]&m == 0 {
							v -= 4
						}
						y[n] = dl * float32(v)
						n++
					}
				}
				m <<= 1
			}
		}
	}
}
