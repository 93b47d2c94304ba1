package quant

// Q4_0: 32 values per block, an fp16 scale d and 16 bytes of 4-bit quants q; x = (q-8)*d.
// Byte j holds value j in its low nibble and value j+16 in its high nibble.

func dequantRowQ4_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[18]byte)(src[i*18:])
		y := (*[32]float32)(dst[i*32:])
		d := halfAt(b[:], 0)
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(b[2+j]&0x0f)-8) * d
			y[j+16] = float32(int32(b[2+j]>>4)-8) * d
		}
	}
}

// quantRowQ4_0 follows quantize_row_q4_0_ref: the value of largest magnitude maps to -8.
func quantRowQ4_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[18]byte)(dst[i*18:])
		var amax, vmax float32
		for _, v := range x {
			if a := absF32(v); a > amax {
				amax, vmax = a, v
			}
		}
		d := vmax / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(b[:], 0, d)
		for j := 0; j < 16; j++ {
			q0 := clampInt(truncOffset(x[j], id, 8.5), 0, 15)
			q1 := clampInt(truncOffset(x[j+16], id, 8.5), 0, 15)
			b[2+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}
