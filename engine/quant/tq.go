package quant

// Ternary types: values in {-1, 0, +1} times an fp16 d.
// TQ1_0 (54 bytes): 48 bytes packing 5 trits each (as a base-3 fraction of 256) and 4
// bytes packing 4 trits each, then d. TQ2_0 (66 bytes): 64 bytes of 2-bit codes
// (value = code-1; 32 values per shift, as in Q2_K), then d.

// trit extracts trit n (0 = most significant) from a byte holding a base-3 fraction.
func trit(q uint8, n int) float32 {
	pow3 := [5]uint8{1, 3, 9, 27, 81}
	v := q * pow3[n] // wraps modulo 256 on purpose: it drops the trits above n
	return float32(int32((uint16(v)*3)>>8) - 1)
}

func dequantRowTQ1_0(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[54]byte)(src[i*54:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 52)
		k := 0
		for n := 0; n < 5; n++ {
			for m := 0; m < 32; m++ {
				y[k] = trit(b[m], n) * d
				k++
			}
		}
		for n := 0; n < 5; n++ {
			for m := 0; m < 16; m++ {
				y[k] = trit(b[32+m], n) * d
				k++
			}
		}
		for n := 0; n < 4; n++ {
			for m := 0; m < 4; m++ {
				y[k] = trit(b[48+m], n) * d
				k++
			}
		}
	}
}

func dequantRowTQ2_0(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[66]byte)(src[i*66:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 64)
		k := 0
		for j := 0; j < 64; j += 32 {
			for shift := uint(0); shift < 8; shift += 2 {
				for m := 0; m < 32; m++ {
					y[k] = float32(int32((b[j+m]>>shift)&3)-1) * d
					k++
				}
			}
		}
	}
}

// tqAmaxScale returns the block's scale d = max|x| and 1/d (0 for an all-zero block).
func tqAmaxScale(x []float32) (d, id float32) {
	for _, v := range x {
		d = max(d, absF32(v))
	}
	if d != 0 {
		id = 1 / d
	}
	return d, id
}

// tritOf is round(x*id) + 1 clamped to a trit (0, 1, 2): ggml's lroundf(x*id) + 1.
func tritOf(x, id float32) uint8 { return uint8(clampInt(roundAway(x*id), -1, 1) + 1) }

// packTrits stores up to 5 trits (first most significant) as a base-3 fraction of 256,
// rounded up so that the decoder's multiply-and-shift recovers each trit.
func packTrits(q uint16) uint8 { return uint8((q*256 + 242) / 243) }

// quantRowTQ1_0 follows quantize_row_tq1_0_ref: d = max|x|, trits round(x/d).
func quantRowTQ1_0(src []float32, dst []byte) {
	for i := range len(src) / QK_K {
		x := src[i*QK_K : (i+1)*QK_K]
		b := (*[54]byte)(dst[i*54:])
		d, id := tqAmaxScale(x)
		putHalf(b[:], 52, d)
		for m := 0; m < 32; m++ {
			var q uint16
			for n := 0; n < 5; n++ {
				q = q*3 + uint16(tritOf(x[m+32*n], id))
			}
			b[m] = packTrits(q)
		}
		for m := 0; m < 16; m++ {
			var q uint16
			for n := 0; n < 5; n++ {
				q = q*3 + uint16(tritOf(x[160+m+16*n], id))
			}
			b[32+m] = packTrits(q)
		}
		for j := 0; j < 4; j++ {
			var q uint16
			for n := 0; n < 4; n++ {
				q = q*3 + uint16(tritOf(x[240+j+4*n], id))
			}
			b[48+j] = packTrits(q * 3) // 4 trits, shifted up to the top
		}
	}
}

// quantRowTQ2_0 follows quantize_row_tq2_0_ref: d = max|x|, 2-bit codes round(x/d)+1.
func quantRowTQ2_0(src []float32, dst []byte) {
	for i := range len(src) / QK_K {
		x := src[i*QK_K : (i+1)*QK_K]
		b := (*[66]byte)(dst[i*66:])
		d, id := tqAmaxScale(x)
		putHalf(b[:], 64, d)
		for j := 0; j < 64; j += 32 {
			xs := x[4*j : 4*j+128]
			for m := 0; m < 32; m++ {
				var q uint8
				for n := 0; n < 4; n++ {
					q |= tritOf(xs[m+32*n], id) << (2 * n)
				}
				b[j+m] = q
			}
		}
	}
}
