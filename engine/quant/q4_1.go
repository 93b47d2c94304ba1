package quant

// Q4_1: 32 values per block, fp16 scale d and minimum m, 16 bytes of 4-bit quants; x = q*d + m.

func dequantRowQ4_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[20]byte)(src[i*20:])
		y := (*[32]float32)(dst[i*32:])
		d, m := halfAt(b[:], 0), halfAt(b[:], 2)
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(b[4+j]&0x0f)*d) + m
			y[j+16] = float32(float32(b[4+j]>>4)*d) + m
		}
	}
}

// quantRowQ4_1 follows quantize_row_q4_1_ref: [min, max] split in 15 steps.
func quantRowQ4_1(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[20]byte)(dst[i*20:])
		vmin, vmax := minMaxF32(x[:])
		d := (vmax - vmin) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(b[:], 0, d)
		putHalf(b[:], 2, vmin)
		for j := 0; j < 16; j++ {
			q0 := clampInt(truncInt(float32((x[j]-vmin)*id)+0.5), 0, 15)
			q1 := clampInt(truncInt(float32((x[j+16]-vmin)*id)+0.5), 0, 15)
			b[4+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}
