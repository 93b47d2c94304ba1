package quant

import "encoding/binary"

// Q5_0: 32 values per block, fp16 scale d, 32 high bits qh (bit j is the 5th bit of value j),
// 16 bytes of low nibbles laid out as in Q4_0; x = (q-16)*d.

func dequantRowQ5_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[22]byte)(src[i*22:])
		y := (*[32]float32)(dst[i*32:])
		d := halfAt(b[:], 0)
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := 0; j < 16; j++ {
			h0 := (qh >> j << 4) & 0x10
			h1 := (qh >> (j + 12)) & 0x10
			y[j] = float32(int32(uint32(b[6+j]&0x0f)|h0)-16) * d
			y[j+16] = float32(int32(uint32(b[6+j]>>4)|h1)-16) * d
		}
	}
}

// quantRowQ5_0 follows quantize_row_q5_0_ref: the value of largest magnitude maps to -16.
func quantRowQ5_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[22]byte)(dst[i*22:])
		var amax, vmax float32
		for _, v := range x {
			if a := absF32(v); a > amax {
				amax, vmax = a, v
			}
		}
		d := vmax / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(b[:], 0, d)
		var qh uint32
		for j := 0; j < 16; j++ {
			q0 := uint32(clampInt(truncOffset(x[j], id, 16.5), 0, 31))
			q1 := uint32(clampInt(truncOffset(x[j+16], id, 16.5), 0, 31))
			b[6+j] = uint8(q0&0x0f) | uint8(q1&0x0f)<<4
			qh |= (q0 >> 4 & 1) << j
			qh |= (q1 >> 4 & 1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}
