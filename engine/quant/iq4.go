package quant

import "encoding/binary"

// IQ4_NL: 32 values per block, fp16 d and 16 bytes of 4-bit indices into the non-linear
// codebook KValuesIQ4NL (laid out as Q4_0); x = d*kvalue[q].
// IQ4_XS: 256 values in 8 groups of 32, fp16 d, 6-bit group scales (offset 32) split into
// scales_h (2 bits each, uint16) and scales_l (4 bits each), then 16 index bytes per group.

func dequantRowIQ4_NL(src []byte, dst []float32) {
	kv := KValuesIQ4NL()
	for i := range len(dst) / 32 {
		b := (*[18]byte)(src[i*18:])
		y := (*[32]float32)(dst[i*32:])
		d := halfAt(b[:], 0)
		for j := 0; j < 16; j++ {
			y[j] = d * float32(kv[b[2+j]&0x0f])
			y[j+16] = d * float32(kv[b[2+j]>>4])
		}
	}
}

func dequantRowIQ4_XS(src []byte, dst []float32) {
	kv := KValuesIQ4NL()
	for i := range len(dst) / QK_K {
		b := (*[136]byte)(src[i*136:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		sh := binary.LittleEndian.Uint16(b[2:])
		for ib := 0; ib < 8; ib++ {
			ls := int32((b[4+ib/2]>>(4*uint(ib%2)))&0x0f) | int32((sh>>(2*uint(ib)))&3)<<4
			dl := d * float32(ls-32)
			qs := b[8+16*ib : 8+16*ib+16]
			out := y[32*ib : 32*ib+32]
			for j := 0; j < 16; j++ {
				out[j] = dl * float32(kv[qs[j]&0x0f])
				out[j+16] = dl * float32(kv[qs[j]>>4])
			}
		}
	}
}

// bestIndexIQ4NL is ggml's best_index_int8 over the IQ4_NL codebook: the nearest entry.
func bestIndexIQ4NL(kv *[16]int8, x float32) int {
	if x <= float32(kv[0]) {
		return 0
	}
	if x >= float32(kv[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x < float32(kv[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if x-float32(kv[hi-1]) < float32(kv[hi])-x {
		return hi - 1
	}
	return hi
}

// iq4GroupScale is the per-32-values search of ggml's quantize_row_iq4_nl_impl (no
// importance matrix, ntry=7): weights x^2, a first scale from the largest value, then 15
// trial scales each refined by least squares; it returns the best scale (0 for a zero group).
func iq4GroupScale(kv *[16]int8, x []float32) float32 {
	var amax, vmax float32
	for _, v := range x {
		if a := absF32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	fit := func(id float32) (sumQX, sumQ2 float32) {
		for _, v := range x {
			q := float32(kv[bestIndexIQ4NL(kv, id*v)])
			w := v * v
			sumQX += w * q * v
			sumQ2 += w * q * q
		}
		return sumQX, sumQ2
	}
	const ntry = 7
	d := -vmax / float32(kv[0])
	sumQX, sumQ2 := fit(1 / d)
	if sumQ2 > 0 {
		d = sumQX / sumQ2
	}
	best := d * sumQX
	for itry := -ntry; itry <= ntry; itry++ {
		sqx, sq2 := fit((float32(itry) + float32(kv[0])) / vmax)
		if sq2 > 0 && sqx*sqx > best*sq2 {
			d = sqx / sq2
			best = d * sqx
		}
	}
	return d
}

// iq4PutIndices writes the 16 index bytes of 32 values scaled by 1/d (d may be 0).
func iq4PutIndices(kv *[16]int8, x []float32, d float32, qs []byte) {
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j := 0; j < 16; j++ {
		qs[j] = uint8(bestIndexIQ4NL(kv, id*x[j])) | uint8(bestIndexIQ4NL(kv, id*x[j+16]))<<4
	}
}

// quantRowIQ4_NL follows ggml's quantize_iq4_nl without an importance matrix (what
// llama-quantize runs; quantize_row_iq4_nl_ref skips the search): the group search, then
// the indices recomputed against the chosen scale.
func quantRowIQ4_NL(src []float32, dst []byte) {
	kv := KValuesIQ4NL()
	for i := range len(src) / 32 {
		x := src[i*32 : i*32+32]
		b := (*[18]byte)(dst[i*18:])
		d := iq4GroupScale(&kv, x)
		putHalf(b[:], 0, d)
		iq4PutIndices(&kv, x, d, b[2:18])
	}
}

// quantRowIQ4_XS follows ggml's quantize_iq4_xs without an importance matrix: the group
// search per 32 values, 6-bit group scales relative to the largest, indices recomputed
// against each rounded group scale.
func quantRowIQ4_XS(src []float32, dst []byte) {
	kv := KValuesIQ4NL()
	for i := range len(src) / QK_K {
		x := src[i*QK_K : (i+1)*QK_K]
		b := (*[136]byte)(dst[i*136:])
		clear(b[:])
		var scales [8]float32
		var maxScale, amaxScale float32
		for ib := 0; ib < 8; ib++ {
			scales[ib] = iq4GroupScale(&kv, x[32*ib:32*ib+32])
			if a := absF32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		putHalf(b[:], 0, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sh uint16
		for ib := 0; ib < 8; ib++ {
			l := clampInt(nearestInt(id*scales[ib]), -32, 31)
			iq4PutIndices(&kv, x[32*ib:32*ib+32], d*float32(l), b[8+16*ib:8+16*ib+16])
			l += 32
			b[4+ib/2] |= uint8(l&0x0f) << (4 * uint(ib%2))
			sh |= uint16(l>>4) << (2 * uint(ib))
		}
		binary.LittleEndian.PutUint16(b[2:], sh)
	}
}
