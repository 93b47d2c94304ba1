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
