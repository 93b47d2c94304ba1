package quant

import (
	"encoding/binary"
	"fmt"
)

// dequantRowFunc decodes whole blocks: len(src) is exactly the bytes of len(dst) values.
type dequantRowFunc func(src []byte, dst []float32)

// dequantFunc picks the decoder of t. A switch, not a table, so the package keeps no state.
func dequantFunc(t Type) (dequantRowFunc, bool) {
	switch t {
	case F32:
		return dequantRowF32, true
	case F16:
		return dequantRowF16, true
	case BF16:
		return dequantRowBF16, true
	case Q4_0:
		return dequantRowQ4_0, true
	case Q4_1:
		return dequantRowQ4_1, true
	case Q5_0:
		return dequantRowQ5_0, true
	case Q5_1:
		return dequantRowQ5_1, true
	case Q8_0:
		return dequantRowQ8_0, true
	case Q2_K:
		return dequantRowQ2_K, true
	case Q3_K:
		return dequantRowQ3_K, true
	case Q4_K:
		return dequantRowQ4_K, true
	case Q5_K:
		return dequantRowQ5_K, true
	case Q6_K:
		return dequantRowQ6_K, true
	case IQ4_NL:
		return dequantRowIQ4_NL, true
	case IQ4_XS:
		return dequantRowIQ4_XS, true
	case MXFP4:
		return dequantRowMXFP4, true
	case NVFP4:
		return dequantRowNVFP4, true
	case IQ2_XXS:
		return dequantRowIQ2_XXS, true
	case IQ2_XS:
		return dequantRowIQ2_XS, true
	case IQ2_S:
		return dequantRowIQ2_S, true
	case IQ3_XXS:
		return dequantRowIQ3_XXS, true
	case IQ3_S:
		return dequantRowIQ3_S, true
	case IQ1_S:
		return dequantRowIQ1_S, true
	case IQ1_M:
		return dequantRowIQ1_M, true
	case TQ1_0:
		return dequantRowTQ1_0, true
	case TQ2_0:
		return dequantRowTQ2_0, true
	}
	return nil, false
}

// CanDequantize reports whether Dequantize decodes t.
func CanDequantize(t Type) bool { _, ok := dequantFunc(t); return ok }

// Dequantize decodes len(dst) values (a whole number of blocks) from src. It reads exactly
// RowBytes(t, len(dst)) bytes from the start of src; src may be longer.
func Dequantize(t Type, src []byte, dst []float32) error {
	f, ok := dequantFunc(t)
	if !ok {
		if !t.Known() {
			return fmt.Errorf("quant: dequantize: unknown type id %d", uint32(t))
		}
		return fmt.Errorf("quant: dequantize: type %s is not supported", t)
	}
	need, err := RowBytes(t, len(dst))
	if err != nil {
		return fmt.Errorf("quant: dequantize: %w", err)
	}
	if len(src) < need {
		return fmt.Errorf("quant: dequantize %s: %d values need %d bytes, src has %d", t, len(dst), need, len(src))
	}
	f(src[:need], dst)
	return nil
}

// halfAt decodes the little-endian fp16 at b[off:].
func halfAt(b []byte, off int) float32 { return FP16ToFP32(binary.LittleEndian.Uint16(b[off:])) }
