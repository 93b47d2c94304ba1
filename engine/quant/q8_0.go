package quant

// Q8_0: 32 values per block, fp16 scale d and 32 signed bytes q; x = q*d.

func dequantRowQ8_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[34]byte)(src[i*34:])
		y := (*[32]float32)(dst[i*32:])
		d := halfAt(b[:], 0)
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(b[2+j])) * d
		}
	}
}

// quantRowQ8_0 follows quantize_row_q8_0_ref: d = max|x|/127, q = round(x/d).
func quantRowQ8_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[34]byte)(dst[i*34:])
		var amax float32
		for _, v := range x {
			amax = max(amax, absF32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(b[:], 0, d)
		for j := 0; j < 32; j++ {
			b[2+j] = uint8(int8(clampInt(roundAway(x[j]*id), -127, 127)))
		}
	}
}
