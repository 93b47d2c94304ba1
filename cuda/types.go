package cuda

import "fmt"

// QuantType is a GGML tensor type id (the same numbers as GGUF and engine/quant), for
// the weight formats the kernels read.
type QuantType uint32

// The weight types the kernels decode.
const (
	F32     QuantType = 0
	F16     QuantType = 1
	Q4_0    QuantType = 2
	Q4_1    QuantType = 3
	Q5_0    QuantType = 6
	Q5_1    QuantType = 7
	Q8_0    QuantType = 8
	Q2_K    QuantType = 10
	Q3_K    QuantType = 11
	Q4_K    QuantType = 12
	Q5_K    QuantType = 13
	Q6_K    QuantType = 14
	IQ2_XXS QuantType = 16
	IQ2_XS  QuantType = 17
	IQ3_XXS QuantType = 18
	IQ4_NL  QuantType = 20
	IQ3_S   QuantType = 21
	IQ2_S   QuantType = 22
	IQ4_XS  QuantType = 23
	BF16    QuantType = 30
	MXFP4   QuantType = 39
)

// layout is a type's kernel-name suffix and block geometry (values, bytes per block).
// Plain types count as 8-value blocks, as the kernels do.
func (t QuantType) layout() (suffix string, qk, bytes int, ok bool) {
	switch t {
	case F32:
		return "f32", 8, 32, true
	case F16:
		return "f16", 8, 16, true
	case BF16:
		return "bf16", 8, 16, true
	case Q4_0:
		return "q4_0", 32, 18, true
	case Q4_1:
		return "q4_1", 32, 20, true
	case Q5_0:
		return "q5_0", 32, 22, true
	case Q5_1:
		return "q5_1", 32, 24, true
	case Q8_0:
		return "q8_0", 32, 34, true
	case IQ4_NL:
		return "iq4_nl", 32, 18, true
	case MXFP4:
		return "mxfp4", 32, 17, true
	case Q2_K:
		return "q2_K", 256, 84, true
	case Q3_K:
		return "q3_K", 256, 110, true
	case Q4_K:
		return "q4_K", 256, 144, true
	case Q5_K:
		return "q5_K", 256, 176, true
	case Q6_K:
		return "q6_K", 256, 210, true
	case IQ4_XS:
		return "iq4_xs", 256, 136, true
	case IQ2_XXS:
		return "iq2_xxs", 256, 66, true
	case IQ2_XS:
		return "iq2_xs", 256, 74, true
	case IQ2_S:
		return "iq2_s", 256, 82, true
	case IQ3_XXS:
		return "iq3_xxs", 256, 98, true
	case IQ3_S:
		return "iq3_s", 256, 110, true
	}
	return "", 0, 0, false
}

// Supported reports whether the kernels read weights of type t.
func (t QuantType) Supported() bool { _, _, _, ok := t.layout(); return ok }

// SupportedTypes lists every weight type the kernels read.
func SupportedTypes() []QuantType {
	return []QuantType{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS,
		IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S}
}

func (t QuantType) String() string {
	if s, _, _, ok := t.layout(); ok {
		return s
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// RowBytes is the size in bytes of one row of cols values of type t.
func (t QuantType) RowBytes(cols int) (int, error) {
	_, qk, bytes, ok := t.layout()
	if !ok {
		return 0, fmt.Errorf("cuda: weight type %v has no kernel", t)
	}
	if cols <= 0 || cols%qk != 0 {
		return 0, fmt.Errorf("cuda: %v: %d columns is not a positive multiple of the %d-value block", t, cols, qk)
	}
	return cols / qk * bytes, nil
}
