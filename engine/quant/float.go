package quant

import (
	"encoding/binary"
	"math"
)

func dequantRowF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantRowF16(src []byte, dst []float32) {
	for i := range dst {
		h := binary.LittleEndian.Uint16(src[2*i:])
		if h&0x7c00-0x400 < 0x7800 { // normal: FP16ToFP32's fast path, inlined by hand
			dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)+0x1c000)<<13)
			continue
		}
		dst[i] = fp16SpecialToFP32(h)
	}
}

func dequantRowBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantRowF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantRowF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToFP16(v))
	}
}

func quantRowBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToBF16(v))
	}
}
