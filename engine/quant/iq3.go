package quant

import (
	"encoding/binary"
	"math"
)

// The IQ3 types code 4 values at a time as an index into a grid of 4-vectors (iq_grids.go),
// with one sign bit per value.
//
// IQ3_XXS (98 bytes): fp16 d, 64 grid index bytes, then per 32 values a uint32 with four
// 7-bit sign indices (into ksigns) and a 4-bit scale s on top; x = d*(0.5+s)/2 * grid * sign.
// IQ3_S (110 bytes): fp16 d, 64 low index bytes, 8 qh bytes (the 9th index bit), 32 sign
// bytes, 4 scale bytes (two 4-bit scales each, one per 32 values); x = d*(1+2s) * grid * sign.

// iq3Values is db times each of a grid's 8 coordinate values, computed once per scale.
func iq3Values(coords *[8]float32, db float32) (v [8]float32) {
	for k, c := range coords {
		v[k] = db * c
	}
	return v
}

// iq3Put4 writes grid entry e's 4 values from vals, negating where signs has bits set (bit
// j of signs for value j) by flipping the float's sign bit.
func iq3Put4(out []float32, vals *[8]float32, e uint32, signs uint8) {
	_ = out[3]
	for j := 0; j < 4; j++ {
		v := vals[(e>>(4*j))&7]
		out[j] = math.Float32frombits(math.Float32bits(v) ^ uint32(signs>>j&1)<<31)
	}
}

func dequantRowIQ3_XXS(src []byte, dst []float32) {
	coords := [8]float32{4, 12, 20, 28, 36, 44, 52, 62}
	for i := range len(dst) / QK_K {
		b := (*[98]byte)(src[i*98:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		for ib := 0; ib < 8; ib++ {
			qs := b[2+8*ib : 2+8*ib+8]
			aux := binary.LittleEndian.Uint32(b[66+4*ib:])
			vals := iq3Values(&coords, d*(0.5+float32(aux>>28))*0.5)
			for l := 0; l < 4; l++ {
				signs := ksignsIQ2XS(aux >> (7 * uint(l)))
				out := y[32*ib+8*l:]
				iq3Put4(out, &vals, gridEntry(gridHexIQ3XXS, int(qs[2*l])), signs)
				iq3Put4(out[4:], &vals, gridEntry(gridHexIQ3XXS, int(qs[2*l+1])), signs>>4)
			}
		}
	}
}

func dequantRowIQ3_S(src []byte, dst []float32) {
	coords := [8]float32{1, 3, 5, 7, 9, 11, 13, 15}
	for i := range len(dst) / QK_K {
		b := (*[110]byte)(src[i*110:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		qs, qh, signs, scales := b[2:66], b[66:74], b[74:106], b[106:110]
		for ib := 0; ib < 8; ib++ {
			s := int32(scales[ib/2]>>(4*uint(ib%2))) & 0x0f
			vals := iq3Values(&coords, d*float32(1+2*s))
			for l := 0; l < 4; l++ {
				i0 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*uint(l))&256
				i1 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*uint(l))&256
				sg := signs[4*ib+l]
				out := y[32*ib+8*l:]
				iq3Put4(out, &vals, gridEntry(gridHexIQ3S, i0), sg)
				iq3Put4(out[4:], &vals, gridEntry(gridHexIQ3S, i1), sg>>4)
			}
		}
	}
}
