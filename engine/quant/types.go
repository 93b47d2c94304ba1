// Package quant holds GGML's block formats: their sizes, dequantisation to float32,
// quantisation for the formats Strata writes, and the CPU dot-product kernels.
//
// Each quant family lives in its own file (q4_0.go, q4_k.go, iq2.go, ...), the way ggml
// keeps them apart. Block layouts are ggml's (ggml-common.h), byte for byte.
package quant

import (
	"fmt"
	"math"
)

// Type is a GGML tensor type id, exactly as stored in a GGUF tensor info.
type Type uint32

// GGML type ids. Gaps are ids ggml has retired.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
)

// QK_K is the super-block size of the k-quants and i-quants.
const QK_K = 256

// typeInfo describes one type's block geometry.
type typeInfo struct {
	name       string
	blockSize  int // values per block
	blockBytes int // bytes per block
}

// info returns the geometry of t, or ok=false for ids Strata does not know.
// A switch rather than a package-level table keeps the package free of mutable state.
func info(t Type) (typeInfo, bool) {
	switch t {
	case F32:
		return typeInfo{"F32", 1, 4}, true
	case F16:
		return typeInfo{"F16", 1, 2}, true
	case BF16:
		return typeInfo{"BF16", 1, 2}, true
	case F64:
		return typeInfo{"F64", 1, 8}, true
	case I8:
		return typeInfo{"I8", 1, 1}, true
	case I16:
		return typeInfo{"I16", 1, 2}, true
	case I32:
		return typeInfo{"I32", 1, 4}, true
	case I64:
		return typeInfo{"I64", 1, 8}, true
	case Q4_0:
		return typeInfo{"Q4_0", 32, 18}, true
	case Q4_1:
		return typeInfo{"Q4_1", 32, 20}, true
	case Q5_0:
		return typeInfo{"Q5_0", 32, 22}, true
	case Q5_1:
		return typeInfo{"Q5_1", 32, 24}, true
	case Q8_0:
		return typeInfo{"Q8_0", 32, 34}, true
	case Q8_1:
		return typeInfo{"Q8_1", 32, 36}, true
	case Q2_K:
		return typeInfo{"Q2_K", QK_K, 84}, true
	case Q3_K:
		return typeInfo{"Q3_K", QK_K, 110}, true
	case Q4_K:
		return typeInfo{"Q4_K", QK_K, 144}, true
	case Q5_K:
		return typeInfo{"Q5_K", QK_K, 176}, true
	case Q6_K:
		return typeInfo{"Q6_K", QK_K, 210}, true
	case Q8_K:
		return typeInfo{"Q8_K", QK_K, 292}, true
	case IQ2_XXS:
		return typeInfo{"IQ2_XXS", QK_K, 66}, true
	case IQ2_XS:
		return typeInfo{"IQ2_XS", QK_K, 74}, true
	case IQ2_S:
		return typeInfo{"IQ2_S", QK_K, 82}, true
	case IQ3_XXS:
		return typeInfo{"IQ3_XXS", QK_K, 98}, true
	case IQ3_S:
		return typeInfo{"IQ3_S", QK_K, 110}, true
	case IQ1_S:
		return typeInfo{"IQ1_S", QK_K, 50}, true
	case IQ1_M:
		return typeInfo{"IQ1_M", QK_K, 56}, true
	case IQ4_NL:
		return typeInfo{"IQ4_NL", 32, 18}, true
	case IQ4_XS:
		return typeInfo{"IQ4_XS", QK_K, 136}, true
	case TQ1_0:
		return typeInfo{"TQ1_0", QK_K, 54}, true
	case TQ2_0:
		return typeInfo{"TQ2_0", QK_K, 66}, true
	case MXFP4:
		return typeInfo{"MXFP4", 32, 17}, true
	case NVFP4:
		return typeInfo{"NVFP4", 64, 36}, true
	}
	return typeInfo{}, false
}

// Known reports whether t is a type id Strata recognises (it may still lack a dequantiser).
func (t Type) Known() bool { _, ok := info(t); return ok }

func (t Type) String() string {
	if ti, ok := info(t); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of values one block holds (1 for plain types).
func (t Type) BlockSize() int { ti, _ := info(t); return ti.blockSize }

// BlockBytes is the size of one block in bytes.
func (t Type) BlockBytes() int { ti, _ := info(t); return ti.blockBytes }

// ParseType maps a name such as "q4_k" or "Q4_K" to its Type.
func ParseType(name string) (Type, error) {
	for id := Type(0); id < 64; id++ {
		if ti, ok := info(id); ok && equalFold(ti.name, name) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown type %q", name)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// RowBytes is the byte size of n values of type t; n must be a whole number of blocks.
func RowBytes(t Type, n int) (int, error) {
	ti, ok := info(t)
	if !ok {
		return 0, fmt.Errorf("quant: unknown type id %d", uint32(t))
	}
	if n < 0 || n%ti.blockSize != 0 {
		return 0, fmt.Errorf("quant: %s: %d values is not a whole number of %d-value blocks", ti.name, n, ti.blockSize)
	}
	return n / ti.blockSize * ti.blockBytes, nil
}

// FP16ToFP32 decodes an IEEE half, subnormals included. The normal case is small enough
// to inline; zeros, subnormals, infinities and NaNs take fp16SpecialToFP32.
func FP16ToFP32(h uint16) float32 {
	if h&0x7c00-0x400 < 0x7800 { // exponent neither 0 nor 31 (uint16 wrap-around for 0)
		// Rebias the exponent from 15 to 127: (e+112)<<23 | mant<<13.
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)+0x1c000)<<13)
	}
	return fp16SpecialToFP32(h)
}

func fp16SpecialToFP32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value = mant * 2^-24, exact in float32
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// FP32ToFP16 rounds to nearest even, with overflow to inf and gradual underflow.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	if a := b & 0x7fffffff; a-0x38800000 < 0x47800000-0x38800000 {
		// 2^-14 <= |f| < 2^16: a normal half (or inf after rounding). Round the 13 dropped
		// mantissa bits to nearest even, letting a carry run into the exponent, then
		// rebias the exponent from 127 to 15.
		r := a + 0xfff + (a>>13)&1 - 0x38000000
		return uint16(b>>16)&0x8000 | uint16(r>>13)
	}
	return fp32ToFP16Slow(f)
}

// fp32ToFP16Slow handles zeros, subnormal halves, overflow, infinities and NaNs.
func fp32ToFP16Slow(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // inf or nan
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the right answer (up to inf)
	}
	return sign | uint16(r)
}

// BF16ToFP32 widens a bfloat16.
func BF16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP32ToBF16 rounds to nearest even (NaN stays NaN).
func FP32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// KValuesIQ4NL is the non-linear 4-bit codebook shared by IQ4_NL and IQ4_XS.
func KValuesIQ4NL() [16]int8 {
	return [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
}

// KValuesMXFP4 is the E2M1 codebook doubled (ggml stores it as int8 and halves the scale).
func KValuesMXFP4() [16]int8 {
	return [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
}

// E8M0ToFP32Half decodes MXFP4's shared exponent byte as 2^(e-128), the half of 2^(e-127)
// that pairs with the doubled codebook above.
func E8M0ToFP32Half(e uint8) float32 {
	if e < 2 {
		// 2^(e-128) is a float32 subnormal here; build it from bits.
		return math.Float32frombits(uint32(0x00200000) << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}
