package quant

import (
	"encoding/binary"
	"fmt"
)

// The plain Go reference kernels: for one weight row and one activation row, the same
// integer-per-block maths as the x86 kernels, written as scalar loops. They are the path on
// CPUs without AVX2 (and non-amd64 builds) and what the fast path is tested against.

// vdF16 reads the little-endian fp16 at b[off:].
func vdF16(b []byte, off int) float32 {
	return FP16ToFP32(binary.LittleEndian.Uint16(b[off:]))
}

// vdHasIntKernel reports whether t has an integer dot product against 8-bit activations.
func vdHasIntKernel(t Type) bool { return actKindFor(t) != actFloat }

// vdRefDot dots weight row w (RowBytes(t, cols) bytes) with activation row i of a, whose
// kind must be an integer one.
func vdRefDot(t Type, w []byte, a *Activations, i int) float32 {
	cols := a.cols
	nb := cols / a.block
	q := a.qs[i*cols : (i+1)*cols]
	d := a.d[i*nb : (i+1)*nb]
	var sum float32
	if a.kind == actQ8x32 {
		sums := a.sums[i*nb : (i+1)*nb]
		bb := t.BlockBytes()
		for b := 0; b < nb; b++ {
			sum += vdRefBlock32(t, w[b*bb:(b+1)*bb], q[b*32:(b+1)*32], d[b], sums[b])
		}
		return sum
	}
	sums := a.sums[i*nb*16 : (i+1)*nb*16]
	bb := t.BlockBytes()
	for b := 0; b < nb; b++ {
		sum += vdRefBlock256(t, w[b*bb:(b+1)*bb], q[b*QK_K:(b+1)*QK_K], d[b], sums[b*16:(b+1)*16])
	}
	return sum
}

// vdRefBlock32 is one 32-value weight block against one Q8 block (scale ad, value sum as).
func vdRefBlock32(t Type, blk []byte, aq []int8, ad float32, as int16) float32 {
	var isum int32
	// u returns the unsigned nibble (or byte) value j of the block in the offset types.
	switch t {
	case Q4_0, Q4_1:
		qs := blk[2:]
		if t == Q4_1 {
			qs = blk[4:]
		}
		for j := 0; j < 16; j++ {
			isum += int32(qs[j]&15)*int32(aq[j]) + int32(qs[j]>>4)*int32(aq[j+16])
		}
		if t == Q4_0 {
			return vdF16(blk, 0) * ad * float32(isum-8*int32(as))
		}
		return vdF16(blk, 0)*ad*float32(isum) + vdF16(blk, 2)*ad*float32(as)
	case Q5_0, Q5_1:
		off := 2
		if t == Q5_1 {
			off = 4
		}
		qh := binary.LittleEndian.Uint32(blk[off:])
		qs := blk[off+4:]
		for j := 0; j < 16; j++ {
			lo := int32(qs[j]&15) | int32((qh>>j)&1)<<4
			hi := int32(qs[j]>>4) | int32((qh>>(j+16))&1)<<4
			isum += lo*int32(aq[j]) + hi*int32(aq[j+16])
		}
		if t == Q5_0 {
			return vdF16(blk, 0) * ad * float32(isum-16*int32(as))
		}
		return vdF16(blk, 0)*ad*float32(isum) + vdF16(blk, 2)*ad*float32(as)
	case Q8_0:
		for j := 0; j < 32; j++ {
			isum += int32(int8(blk[2+j])) * int32(aq[j])
		}
		return vdF16(blk, 0) * ad * float32(isum)
	case IQ4_NL, MXFP4:
		kv := KValuesIQ4NL()
		qs := blk[2:]
		scale := float32(0)
		if t == MXFP4 {
			kv = KValuesMXFP4()
			qs = blk[1:]
			scale = E8M0ToFP32Half(blk[0])
		} else {
			scale = vdF16(blk, 0)
		}
		for j := 0; j < 16; j++ {
			isum += int32(kv[qs[j]&15])*int32(aq[j]) + int32(kv[qs[j]>>4])*int32(aq[j+16])
		}
		return scale * ad * float32(isum)
	}
	panic(fmt.Sprintf("quant: vdRefBlock32: %s is not a 32-block integer type", t)) // unreachable: callers check actKindFor
}

// vdQ3KScale unpacks the j-th 6-bit scale of a Q3_K block (12 packed bytes), minus 32.
func vdQ3KScale(s []byte, j int) int32 {
	var low byte
	if j < 8 {
		low = s[j] & 15
	} else {
		low = s[j-8] >> 4
	}
	high := (s[8+j%4] >> (2 * (j / 4))) & 3
	return int32(low|high<<4) - 32
}

// vdKScaleMin unpacks the j-th 6-bit scale and min of a Q4_K/Q5_K block (12 packed bytes).
func vdKScaleMin(s []byte, j int) (sc, m int32) {
	if j < 4 {
		return int32(s[j] & 63), int32(s[j+4] & 63)
	}
	return int32(s[j+4]&15 | (s[j-4]>>6)<<4), int32(s[j+4]>>4 | (s[j]>>6)<<4)
}

// vdRefBlock256 is one 256-value weight block against one Q8_K block (scale ad, sixteen
// 16-value sums bs).
func vdRefBlock256(t Type, blk []byte, aq []int8, ad float32, bs []int16) float32 {
	// gdot[g] is the integer dot of the block's unsigned (or signed) codes with group g.
	var gdot [16]int32
	switch t {
	case Q2_K:
		scales, qs := blk[0:16], blk[16:80]
		for h := 0; h < 2; h++ {
			for j := 0; j < 4; j++ {
				for l := 0; l < 32; l++ {
					u := int32(qs[32*h+l]>>(2*j)) & 3
					gdot[8*h+2*j+l/16] += u * int32(aq[128*h+32*j+l])
				}
			}
		}
		var sumi, summ int32
		for g := 0; g < 16; g++ {
			sumi += int32(scales[g]&15) * gdot[g]
			summ += int32(scales[g]>>4) * int32(bs[g])
		}
		return vdF16(blk, 80)*ad*float32(sumi) - vdF16(blk, 82)*ad*float32(summ)
	case Q3_K:
		hmask, qs, scales := blk[0:32], blk[32:96], blk[96:108]
		for h := 0; h < 2; h++ {
			for j := 0; j < 4; j++ {
				for l := 0; l < 32; l++ {
					u := int32(qs[32*h+l]>>(2*j))&3 | (int32(hmask[l]>>(4*h+j))&1)<<2
					gdot[8*h+2*j+l/16] += u * int32(aq[128*h+32*j+l])
				}
			}
		}
		var sumi int32
		for g := 0; g < 16; g++ {
			sumi += vdQ3KScale(scales, g) * (gdot[g] - 4*int32(bs[g]))
		}
		return vdF16(blk, 108) * ad * float32(sumi)
	case Q4_K, Q5_K:
		scales := blk[4:16]
		qs, qh := blk[16:144], []byte(nil)
		if t == Q5_K {
			qh, qs = blk[16:48], blk[48:176]
		}
		var sumi, summ int32
		for p := 0; p < 4; p++ {
			var lo, hi int32
			for l := 0; l < 32; l++ {
				ul, uh := int32(qs[32*p+l]&15), int32(qs[32*p+l]>>4)
				if qh != nil {
					ul |= int32(qh[l]>>(2*p)) & 1 << 4
					uh |= int32(qh[l]>>(2*p+1)) & 1 << 4
				}
				lo += ul * int32(aq[64*p+l])
				hi += uh * int32(aq[64*p+32+l])
			}
			sc1, m1 := vdKScaleMin(scales, 2*p)
			sc2, m2 := vdKScaleMin(scales, 2*p+1)
			sumi += sc1*lo + sc2*hi
			summ += m1*(int32(bs[4*p])+int32(bs[4*p+1])) + m2*(int32(bs[4*p+2])+int32(bs[4*p+3]))
		}
		return vdF16(blk, 0)*ad*float32(sumi) - vdF16(blk, 2)*ad*float32(summ)
	case Q6_K:
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		for h := 0; h < 2; h++ {
			for l := 0; l < 32; l++ {
				a, b, c := ql[64*h+l], ql[64*h+32+l], qh[32*h+l]
				g := 8*h + l/16
				gdot[g] += int32(a&15|(c&3)<<4) * int32(aq[128*h+l])
				gdot[g+2] += int32(b&15|((c>>2)&3)<<4) * int32(aq[128*h+32+l])
				gdot[g+4] += int32(a>>4|((c>>4)&3)<<4) * int32(aq[128*h+64+l])
				gdot[g+6] += int32(b>>4|((c>>6)&3)<<4) * int32(aq[128*h+96+l])
			}
		}
		var sumi int32
		for g := 0; g < 16; g++ {
			sumi += int32(int8(sc[g])) * (gdot[g] - 32*int32(bs[g]))
		}
		return vdF16(blk, 208) * ad * float32(sumi)
	case IQ4_XS:
		kv := KValuesIQ4NL()
		sh := binary.LittleEndian.Uint16(blk[2:])
		sl, qs := blk[4:8], blk[8:136]
		var sumi int32
		for ib := 0; ib < 8; ib++ {
			ls := int32(sl[ib/2]>>(4*(ib%2)))&15 | int32(sh>>(2*ib))&3<<4
			var s int32
			for j := 0; j < 16; j++ {
				s += int32(kv[qs[16*ib+j]&15])*int32(aq[32*ib+j]) + int32(kv[qs[16*ib+j]>>4])*int32(aq[32*ib+16+j])
			}
			sumi += (ls - 32) * s
		}
		return vdF16(blk, 0) * ad * float32(sumi)
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return vdRefBlockIQ(t, blk, aq, ad)
	}
	panic(fmt.Sprintf("quant: vdRefBlock256: %s is not a 256-block integer type", t)) // unreachable: callers check actKindFor
}

// vdRefBlockIQ is one IQ2/IQ3 block against one Q8_K block, as ggml's vec_dot_iq*_q8_K: per
// group of values the integer dot of the signed grid coordinates with the activations, times
// the group's odd integer scale 2s+1; the block's float scale comes once at the end (IQ2:
// d/8, IQ3_XXS: d/4, IQ3_S: d).
func vdRefBlockIQ(t Type, blk []byte, aq []int8, ad float32) float32 {
	var bsum int32
	switch t {
	case IQ2_XXS:
		for ib := 0; ib < 8; ib++ {
			aux := binary.LittleEndian.Uint32(blk[2+8*ib+4:])
			var sumi int32
			for l := 0; l < 4; l++ {
				sumi += vdIQ2Dot8(gridEntry(gridHexIQ2XXS, int(blk[2+8*ib+l])), ksignsIQ2XS(aux>>(7*uint(l))), aq[32*ib+8*l:])
			}
			bsum += sumi * (2*int32(aux>>28) + 1)
		}
		return vdF16(blk, 0) * ad * float32(bsum) * 0.125
	case IQ2_XS, IQ2_S:
		for ib := 0; ib < 8; ib++ {
			sc := blk[66+ib]
			if t == IQ2_S {
				sc = blk[74+ib]
			}
			var sumi [2]int32
			for l := 0; l < 4; l++ {
				var e uint32
				var signs uint8
				if t == IQ2_XS {
					q := uint32(binary.LittleEndian.Uint16(blk[2+8*ib+2*l:]))
					e, signs = gridEntry(gridHexIQ2XS, int(q&511)), ksignsIQ2XS(q>>9)
				} else {
					idx := int(blk[2+4*ib+l]) | int(blk[66+ib])<<(8-2*uint(l))&0x300
					e, signs = gridEntry(gridHexIQ2S, idx), blk[34+4*ib+l]
				}
				sumi[l/2] += vdIQ2Dot8(e, signs, aq[32*ib+8*l:])
			}
			bsum += sumi[0]*(2*int32(sc&15)+1) + sumi[1]*(2*int32(sc>>4)+1)
		}
		return vdF16(blk, 0) * ad * float32(bsum) * 0.125
	case IQ3_XXS:
		coords := [8]int32{4, 12, 20, 28, 36, 44, 52, 62}
		for ib := 0; ib < 8; ib++ {
			qs := blk[2+8*ib : 2+8*ib+8]
			aux := binary.LittleEndian.Uint32(blk[66+4*ib:])
			var sumi int32
			for l := 0; l < 4; l++ {
				signs := ksignsIQ2XS(aux >> (7 * uint(l)))
				a := aq[32*ib+8*l:]
				sumi += vdIQ3Dot4(&coords, gridEntry(gridHexIQ3XXS, int(qs[2*l])), signs, a)
				sumi += vdIQ3Dot4(&coords, gridEntry(gridHexIQ3XXS, int(qs[2*l+1])), signs>>4, a[4:])
			}
			bsum += sumi * (2*int32(aux>>28) + 1)
		}
		return vdF16(blk, 0) * ad * float32(bsum) * 0.25
	case IQ3_S:
		coords := [8]int32{1, 3, 5, 7, 9, 11, 13, 15}
		qs, qh, signs, scales := blk[2:66], blk[66:74], blk[74:106], blk[106:110]
		for ib := 0; ib < 8; ib++ {
			var sumi int32
			for l := 0; l < 4; l++ {
				i0 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*uint(l))&256
				i1 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*uint(l))&256
				sg := signs[4*ib+l]
				a := aq[32*ib+8*l:]
				sumi += vdIQ3Dot4(&coords, gridEntry(gridHexIQ3S, i0), sg, a)
				sumi += vdIQ3Dot4(&coords, gridEntry(gridHexIQ3S, i1), sg>>4, a[4:])
			}
			bsum += sumi * (2*(int32(scales[ib/2]>>(4*uint(ib%2)))&15) + 1)
		}
		return vdF16(blk, 0) * ad * float32(bsum)
	}
	panic(fmt.Sprintf("quant: vdRefBlockIQ: %s is not an IQ2/IQ3 type", t)) // unreachable: vdRefBlock256 checks
}

// vdIQ2Dot8 dots the 8 coordinates of IQ2 grid entry e (2-bit fields into 8, 25, 43), negated
// where signs has bits set, with a[:8].
func vdIQ2Dot8(e uint32, signs uint8, a []int8) int32 {
	coords := [4]int32{8, 25, 43, 0}
	var s int32
	for j := 0; j < 8; j++ {
		v := coords[(e>>(2*j))&3] * int32(a[j])
		if signs>>j&1 != 0 {
			v = -v
		}
		s += v
	}
	return s
}

// vdIQ3Dot4 dots the 4 coordinates of IQ3 grid entry e (4-bit fields into coords), negated
// where signs has bits set, with a[:4].
func vdIQ3Dot4(coords *[8]int32, e uint32, signs uint8, a []int8) int32 {
	var s int32
	for j := 0; j < 4; j++ {
		v := coords[(e>>(4*j))&7] * int32(a[j])
		if signs>>j&1 != 0 {
			v = -v
		}
		s += v
	}
	return s
}
