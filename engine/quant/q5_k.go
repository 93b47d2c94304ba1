package quant

// Q5_K: as Q4_K plus qh[32] holding the fifth bit: for the 64 values of group pair g, bit
// 2g of qh[l] belongs to value l and bit 2g+1 to value l+32. x = d*scale*q - dmin*min.

func dequantRowQ5_K(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[176]byte)(src[i*176:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := halfAt(b[:], 0), halfAt(b[:], 2)
		sc := b[4:16]
		qh := b[16:48]
		for g := 0; g < 4; g++ {
			s1, m1 := kScaleMin(sc, 2*g)
			s2, m2 := kScaleMin(sc, 2*g+1)
			d1, o1 := d*float32(s1), dmin*float32(m1)
			d2, o2 := d*float32(s2), dmin*float32(m2)
			ql := b[48+32*g : 48+32*g+32]
			out := y[64*g : 64*g+64]
			b1, b2 := uint(2*g), uint(2*g+1) // qh bits of this pair of groups
			for l := 0; l < 32; l++ {
				q1 := ql[l]&0x0f | (qh[l]>>b1&1)<<4
				q2 := ql[l]>>4 | (qh[l]>>b2&1)<<4
				out[l] = float32(d1*float32(q1)) - o1
				out[l+32] = float32(d2*float32(q2)) - o2
			}
		}
	}
}

// quantRowQ5_K follows quantize_row_q5_K_ref (as Q4_K with 31 levels and a finer search).
func quantRowQ5_K(src []float32, dst []byte) {
	for i := range len(src) / QK_K {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[176]byte)(dst[i*176:])
		var L [QK_K]uint8
		scales, mins, maxScale, maxMin := kGroupScaleMins(x, &L, 31, -0.5, 15)
		putKScales(b[:], x[:], &L, &scales, &mins, maxScale, maxMin, 31)
		qh := b[16:48]
		clear(qh)
		for g := 0; g < 4; g++ {
			m1, m2 := uint8(1)<<(2*g), uint8(2)<<(2*g)
			for l := 0; l < 32; l++ {
				l1, l2 := L[64*g+l], L[64*g+32+l]
				if l1 > 15 {
					l1 -= 16
					qh[l] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[l] |= m2
				}
				b[48+32*g+l] = l1 | l2<<4
			}
		}
	}
}
