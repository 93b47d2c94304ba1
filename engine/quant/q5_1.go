package quant

import "encoding/binary"

// Q5_1: 32 values per block, fp16 d and m, 32 high bits, 16 bytes of low nibbles; x = q*d + m.

func dequantRowQ5_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[24]byte)(src[i*24:])
		y := (*[32]float32)(dst[i*32:])
		d, m := halfAt(b[:], 0), halfAt(b[:], 2)
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := 0; j < 16; j++ {
			h0 := (qh >> j << 4) & 0x10
			h1 := (qh >> (j + 12)) & 0x10
			y[j] = float32(float32(uint32(b[8+j]&0x0f)|h0)*d) + m
			y[j+16] = float32(float32(uint32(b[8+j]>>4)|h1)*d) + m
		}
	}
}

// quantRowQ5_1 follows quantize_row_q5_1_ref: [min, max] split in 31 steps.
func quantRowQ5_1(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[24]byte)(dst[i*24:])
		vmin, vmax := minMaxF32(x[:])
		d := (vmax - vmin) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(b[:], 0, d)
		putHalf(b[:], 2, vmin)
		var qh uint32
		for j := 0; j < 16; j++ {
			q0 := uint32(clampInt(truncInt(float32((x[j]-vmin)*id)+0.5), 0, 31))
			q1 := uint32(clampInt(truncInt(float32((x[j+16]-vmin)*id)+0.5), 0, 31))
			b[8+j] = uint8(q0&0x0f) | uint8(q1&0x0f)<<4
			qh |= (q0 >> 4 & 1) << j
			qh |= (q1 >> 4 & 1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}
