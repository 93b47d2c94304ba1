package quant

import (
	"encoding/binary"
	"math"
)

// The IQ2 types code 8 values at a time as an index into a grid of 8-vectors with
// coordinates in {8, 25, 43} (iq_grids.go) plus 8 signs; x = db * grid * sign with
// db = d * (0.5 + s) / 4 for a 4-bit group scale s.
//
// IQ2_XXS (66 bytes): fp16 d, then per 32 values two uint32: four 8-bit grid indices, and
// four 7-bit sign indices (into ksigns) with the 4-bit scale in the top bits.
// IQ2_XS (74 bytes): fp16 d, 32 uint16 (9-bit grid index, 7-bit sign index), 8 scale
// bytes holding two 4-bit scales (one per 16 values).
// IQ2_S (82 bytes): fp16 d, 32 low index bytes, 32 sign bytes, 8 qh bytes (2 high index
// bits per 8 values), 8 scale bytes as in IQ2_XS.

// iq2Values is db times each IQ2 grid coordinate (8, 25, 43): the products ggml forms
// value by value, computed once per scale.
func iq2Values(db float32) [4]float32 { return [4]float32{db * 8, db * 25, db * 43, 0} }

// iq2Put8 writes the 8 values of grid entry e (2-bit coordinates) from vals, negating those
// whose bit is set in signs by flipping the float's sign bit (ggml multiplies by -1).
func iq2Put8(out []float32, e uint32, vals *[4]float32, signs uint8) {
	_ = out[7]
	for j := 0; j < 8; j++ {
		v := vals[(e>>(2*j))&3]
		out[j] = math.Float32frombits(math.Float32bits(v) ^ uint32(signs>>j&1)<<31)
	}
}

func dequantRowIQ2_XXS(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[66]byte)(src[i*66:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		for ib := 0; ib < 8; ib++ {
			grid := b[2+8*ib : 2+8*ib+4]
			aux := binary.LittleEndian.Uint32(b[2+8*ib+4:])
			vals := iq2Values(d * (0.5 + float32(aux>>28)) * 0.25)
			for l := 0; l < 4; l++ {
				e := gridEntry(gridHexIQ2XXS, int(grid[l]))
				iq2Put8(y[32*ib+8*l:], e, &vals, ksignsIQ2XS(aux>>(7*uint(l))))
			}
		}
	}
}

func dequantRowIQ2_XS(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[74]byte)(src[i*74:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		for ib := 0; ib < 8; ib++ {
			s := b[66+ib]
			vals := [2][4]float32{
				iq2Values(d * (0.5 + float32(s&0x0f)) * 0.25),
				iq2Values(d * (0.5 + float32(s>>4)) * 0.25),
			}
			for l := 0; l < 4; l++ {
				q := uint32(binary.LittleEndian.Uint16(b[2+8*ib+2*l:]))
				e := gridEntry(gridHexIQ2XS, int(q&511))
				iq2Put8(y[32*ib+8*l:], e, &vals[l/2], ksignsIQ2XS(q>>9))
			}
		}
	}
}

func dequantRowIQ2_S(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[82]byte)(src[i*82:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		qs, signs, qh := b[2:34], b[34:66], b[66:74]
		for ib := 0; ib < 8; ib++ {
			s := b[74+ib]
			vals := [2][4]float32{
				iq2Values(d * (0.5 + float32(s&0x0f)) * 0.25),
				iq2Values(d * (0.5 + float32(s>>4)) * 0.25),
			}
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*uint(l))&0x300
				e := gridEntry(gridHexIQ2S, idx)
				iq2Put8(y[32*ib+8*l:], e, &vals[l/2], signs[4*ib+l])
			}
		}
	}
}
