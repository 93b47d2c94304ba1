package quant

import "encoding/binary"

// The IQ1 types code 8 values at a time as an index into a grid of 8-vectors with
// coordinates in {-1, 0, +1} (iq_grids.go), shifted by ±1/8: x = dl * (grid + delta).
//
// IQ1_S (50 bytes): fp16 d, 32 low index bytes, 8 uint16 qh: per 32 values, four 3-bit high
// index parts, a 3-bit scale s (dl = d*(2s+1)) and the sign of delta in bit 15.
// IQ1_M (56 bytes): 32 low index bytes, 16 qh bytes (per 8 values: 3 high index bits and
// the delta sign bit, two per byte), 4 uint16 scales holding 3-bit scales per 16 values;
// their top nibbles together make the fp16 d.

const iq1Delta = 0.125

// iq1Values is dl*(c+delta) for the grid coordinates c = -1, 0, +1, the products ggml
// forms value by value, computed once per scale and delta.
func iq1Values(dl, delta float32) [4]float32 {
	return [4]float32{dl * (-1 + delta), dl * (0 + delta), dl * (1 + delta), 0}
}

// iq1Put8 writes the 8 values of grid entry e from vals.
func iq1Put8(out []float32, e uint32, vals *[4]float32) {
	_ = out[7]
	for j := 0; j < 8; j++ {
		out[j] = vals[(e>>(2*j))&3]
	}
}

func dequantRowIQ1_S(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[50]byte)(src[i*50:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := halfAt(b[:], 0)
		for ib := 0; ib < 8; ib++ {
			qh := uint32(binary.LittleEndian.Uint16(b[34+2*ib:]))
			dl := d * float32(2*((qh>>12)&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			vals := iq1Values(dl, delta)
			for l := 0; l < 4; l++ {
				idx := int(b[2+4*ib+l]) | int((qh>>(3*uint(l)))&7)<<8
				iq1Put8(y[32*ib+8*l:], gridEntry(gridHexIQ1S, idx), &vals)
			}
		}
	}
}

func dequantRowIQ1_M(src []byte, dst []float32) {
	for i := range len(dst) / QK_K {
		b := (*[56]byte)(src[i*56:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		var sc [4]uint32
		for k := range sc {
			sc[k] = uint32(binary.LittleEndian.Uint16(b[48+2*k:]))
		}
		d := FP16ToFP32(uint16(sc[0]>>12 | (sc[1]>>8)&0x00f0 | (sc[2]>>4)&0x0f00 | sc[3]&0xf000))
		for ib := 0; ib < 8; ib++ {
			shift := 6 * uint(ib%2)
			dl1 := d * float32(2*((sc[ib/2]>>shift)&7)+1)
			dl2 := d * float32(2*((sc[ib/2]>>(shift+3))&7)+1)
			qh0, qh1 := uint32(b[32+2*ib]), uint32(b[32+2*ib+1])
			qs := b[4*ib : 4*ib+4]
			idx := [4]int{
				int(qs[0]) | int((qh0<<8)&0x700),
				int(qs[1]) | int((qh0<<4)&0x700),
				int(qs[2]) | int((qh1<<8)&0x700),
				int(qs[3]) | int((qh1<<4)&0x700),
			}
			signBits := [4]uint32{qh0 & 0x08, qh0 & 0x80, qh1 & 0x08, qh1 & 0x80}
			for l := 0; l < 4; l++ {
				delta := float32(iq1Delta)
				if signBits[l] != 0 {
					delta = -iq1Delta
				}
				dl := dl1
				if l >= 2 {
					dl = dl2
				}
				vals := iq1Values(dl, delta)
				iq1Put8(y[32*ib+8*l:], gridEntry(gridHexIQ1S, idx[l]), &vals)
			}
		}
	}
}
