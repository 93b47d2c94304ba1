package quant

import "math"

// MXFP4: 32 values per block, one E8M0 exponent byte e and 16 bytes of E2M1 codes (laid out
// as Q4_0); x = KValuesMXFP4[q] * 2^(e-128) (the codebook is doubled, the scale halved).
// NVFP4: 64 values per block in 4 sub-blocks of 16, four UE4M3 scale bytes then 32 code
// bytes; sub-block s uses bytes 8s..8s+7, low nibbles first.

func dequantRowMXFP4(src []byte, dst []float32) {
	kv := KValuesMXFP4()
	for i := range len(dst) / 32 {
		b := (*[17]byte)(src[i*17:])
		y := (*[32]float32)(dst[i*32:])
		d := E8M0ToFP32Half(b[0])
		for j := 0; j < 16; j++ {
			y[j] = float32(kv[b[1+j]&0x0f]) * d
			y[j+16] = float32(kv[b[1+j]>>4]) * d
		}
	}
}

// ue4m3ToFP32Half decodes an unsigned E4M3 scale (bias 7) and halves it, pairing with the
// doubled codebook as ggml does. 0x7f (NaN) decodes to 0; bit 7 is ignored.
func ue4m3ToFP32Half(x uint8) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	exp := int((x >> 3) & 0x0f)
	man := float64(x & 7)
	if exp == 0 {
		return float32(math.Ldexp(man, -9) * 0.5)
	}
	return float32(math.Ldexp(1+man/8, exp-7) * 0.5)
}

func dequantRowNVFP4(src []byte, dst []float32) {
	kv := KValuesMXFP4()
	for i := range len(dst) / 64 {
		b := (*[36]byte)(src[i*36:])
		y := (*[64]float32)(dst[i*64:])
		for s := 0; s < 4; s++ {
			d := ue4m3ToFP32Half(b[s])
			qs := b[4+8*s : 4+8*s+8]
			out := y[16*s : 16*s+16]
			for j := 0; j < 8; j++ {
				out[j] = float32(kv[qs[j]&0x0f]) * d
				out[j+8] = float32(kv[qs[j]>>4]) * d
			}
		}
	}
}

// bestIndexMXFP4 returns the code whose value (times d) is nearest to x, the first on ties.
func bestIndexMXFP4(kv *[16]int8, x, d float32) uint8 {
	best, bestErr := 0, absF32(float32(kv[0])*d-x)
	for i := 1; i < 16; i++ {
		if err := absF32(float32(kv[i])*d - x); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// quantRowMXFP4 follows quantize_row_mxfp4_ref: the shared exponent is
// floor(log2(max|x|)) - 2, then each value takes its nearest code.
func quantRowMXFP4(src []float32, dst []byte) {
	kv := KValuesMXFP4()
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[17]byte)(dst[i*17:])
		var amax float32
		for _, v := range x {
			amax = max(amax, absF32(v))
		}
		var e uint8
		if amax > 0 {
			// Clamped to the byte's range, which only matters for values near 0 or inf.
			e = uint8(clampInt(int(math.Floor(math.Log2(float64(amax))))-2+127, 0, 254))
		}
		d := E8M0ToFP32Half(e)
		b[0] = e
		for j := 0; j < 16; j++ {
			b[1+j] = bestIndexMXFP4(&kv, x[j], d) | bestIndexMXFP4(&kv, x[j+16], d)<<4
		}
	}
}

// fp32ToUE4M3 is ggml's ggml_fp32_to_ue4m3: positive values only (else 0), saturating at
// 0x7e (448), rounding half up on the mantissa.
func fp32ToUE4M3(x float32) uint8 {
	if !(x > 0) {
		return 0
	}
	x = min(x, 448)
	bits := math.Float32bits(x)
	e := int(bits>>23&0xff) - 127 + 7
	if e <= 0 {
		m := truncInt(float32(x*512) + 0.5)
		if m < 1 {
			return 0
		}
		return uint8(min(m, 7))
	}
	if e >= 15 {
		return 0x7e
	}
	m := int(bits>>20&7) + int(bits>>19&1)
	if m > 7 {
		m = 0
		e++
		if e >= 15 {
			return 0x7e
		}
	}
	return uint8(e<<3 | m)
}

// quantRowNVFP4 follows quantize_row_nvfp4_ref: per 16 values the scale max|x|/6 in UE4M3,
// then each value takes its nearest E2M1 code.
func quantRowNVFP4(src []float32, dst []byte) {
	kv := KValuesMXFP4()
	for i := range len(src) / 64 {
		b := (*[36]byte)(dst[i*36:])
		for s := 0; s < 4; s++ {
			xb := src[i*64+16*s : i*64+16*s+16]
			var amax float32
			for _, v := range xb {
				amax = max(amax, absF32(v))
			}
			ue := fp32ToUE4M3(amax / 6)
			b[s] = ue
			d := ue4m3ToFP32Half(ue)
			for j := 0; j < 8; j++ {
				b[4+8*s+j] = bestIndexMXFP4(&kv, xb[j], d) | bestIndexMXFP4(&kv, xb[j+8], d)<<4
			}
		}
	}
}
