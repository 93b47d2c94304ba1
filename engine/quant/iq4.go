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

// quantRowIQ4_NL follows ggml's quantize_iq4_nl without an importance matrix (what
// llama-quantize runs; quantize_row_iq4_nl_ref skips the search): weights x^2, a first
// scale from the largest value, 15 trial scales refined by least squares, then the indices
// recomputed against the chosen scale.
func quantRowIQ4_NL(src []float32, dst []byte) {
	kv := KValuesIQ4NL()
	const ntry = 7
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[18]byte)(dst[i*18:])
		var amax, vmax float32
		for _, v := range x {
			if a := absF32(v); a > amax {
				amax, vmax = a, v
			}
		}
		if amax < groupMaxEps {
			clear(b[:])
			continue
		}
		sumFit := func(id float32) (sumQX, sumQ2 float32) {
			for _, v := range x {
				q := float32(kv[bestIndexIQ4NL(&kv, id*v)])
				w := v * v
				sumQX += w * q * v
				sumQ2 += w * q * q
			}
			return sumQX, sumQ2
		}
		d := -vmax / float32(kv[0])
		sumQX, sumQ2 := sumFit(1 / d)
		if sumQ2 > 0 {
			d = sumQX / sumQ2
		}
		best := d * sumQX
		for itry := -ntry; itry <= ntry; itry++ {
			sqx, sq2 := sumFit((float32(itry) + float32(kv[0])) / vmax)
			if sq2 > 0 && sqx*sqx > best*sq2 {
				d = sqx / sq2
				best = d * sqx
			}
		}
		putHalf(b[:], 0, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j := 0; j < 16; j++ {
			b[2+j] = uint8(bestIndexIQ4NL(&kv, id*x[j])) | uint8(bestIndexIQ4NL(&kv, id*x[j+16]))<<4
		}
	}
}
