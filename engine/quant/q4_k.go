package quant

// Q4_K: 256 values in 8 groups of 32. fp16 d and dmin, scales[12] packing 8 6-bit scales
// and 8 6-bit mins, qs[128]; x = d*scale*q - dmin*min. Each 64 values share 32 bytes of
// qs: low nibbles first, then high nibbles.

// kScaleMin unpacks scale and min j (0..7) of the 12-byte Q4_K/Q5_K scale block.
func kScaleMin(s []byte, j int) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return (s[j+4] & 0x0f) | (s[j-4]>>6)<<4, (s[j+4] >> 4) | (s[j]>>6)<<4
}

// putKScaleMin packs the 8 scales and mins (each < 64) into the 12-byte scale block.
func putKScaleMin(s []byte, ls, lm *[8]uint8) {
	for j := 0; j < 8; j++ {
		if j < 4 {
			s[j] = ls[j]
			s[j+4] = lm[j]
		} else {
			s[j+4] = (ls[j] & 0x0f) | (lm[j]&0x0f)<<4
			s[j-4] |= (ls[j] >> 4) << 6
			s[j] |= (lm[j] >> 4) << 6
		}
	}
}

func dequantRowQ4_K(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[144]byte)(src[i*144:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := halfAt(b[:], 0), halfAt(b[:], 2)
		sc := b[4:16]
		for g := 0; g < 4; g++ {
			s1, m1 := kScaleMin(sc, 2*g)
			s2, m2 := kScaleMin(sc, 2*g+1)
			d1, o1 := d*float32(s1), dmin*float32(m1)
			d2, o2 := d*float32(s2), dmin*float32(m2)
			q := b[16+32*g : 16+32*g+32]
			out := y[64*g : 64*g+64]
			for l := 0; l < 32; l++ {
				out[l] = float32(d1*float32(q[l]&0x0f)) - o1
				out[l+32] = float32(d2*float32(q[l]>>4)) - o2
			}
		}
	}
}

// quantRowQ4_K follows quantize_row_q4_K_ref: per group of 32 a weighted scale+min search
// (makeQKX2Quants), then 6-bit scales and mins relative to the block's largest, then the
// quants recomputed against the rounded scales.
func quantRowQ4_K(src []float32, dst []byte) {
	for i := range len(src) / QK_K {
		x := (*[QK_K]float32)(src[i*QK_K:])
		b := (*[144]byte)(dst[i*144:])
		var L [QK_K]uint8
		scales, mins, maxScale, maxMin := kGroupScaleMins(x, &L, 15, -1, 20)
		putKScales(b[:], x[:], &L, &scales, &mins, maxScale, maxMin, 15)
		for g := 0; g < 4; g++ {
			for l := 0; l < 32; l++ {
				b[16+32*g+l] = L[64*g+l] | L[64*g+32+l]<<4
			}
		}
	}
}

// putKScales writes d, dmin and the packed 6-bit scales of a Q4_K/Q5_K block (b[0:16]) and
// recomputes L against the rounded scales, as the ggml reference does.
func putKScales(b []byte, x []float32, L *[QK_K]uint8, scales, mins *[8]float32, maxScale, maxMin float32, nmax int) {
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var ls, lm [8]uint8
	for j := 0; j < 8; j++ {
		ls[j] = uint8(clampInt(nearestInt(invScale*scales[j]), 0, 63))
		lm[j] = uint8(clampInt(nearestInt(invMin*mins[j]), 0, 63))
	}
	putHalf(b, 0, maxScale/63)
	putHalf(b, 2, maxMin/63)
	clear(b[4:16])
	putKScaleMin(b[4:16], &ls, &lm)
	d, dmin := halfAt(b, 0), halfAt(b, 2)
	for j := 0; j < 8; j++ {
		sc, m := kScaleMin(b[4:16], j)
		dj := d * float32(sc)
		if dj == 0 {
			continue
		}
		dm := dmin * float32(m)
		for l := 0; l < 32; l++ {
			L[32*j+l] = uint8(clampInt(nearestInt((x[32*j+l]+dm)/dj), 0, nmax))
		}
	}
}

// kGroupScaleMins is the first step Q4_K and Q5_K share: for each group of 32 values a
// weighted scale-and-min search (weights avX + |x|) into L, with nmax levels and the
// search's rmin and nstep; it returns the scales, the mins and their largest values.
func kGroupScaleMins(x *[QK_K]float32, L *[QK_K]uint8, nmax int, rmin float32, nstep int) (scales, mins [8]float32, maxScale, maxMin float32) {
	var (
		laux    [32]uint8
		weights [32]float32
	)
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += v * v
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + absF32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, 0.1, nstep, false)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	return scales, mins, maxScale, maxMin
}
