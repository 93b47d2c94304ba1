package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is a GGUF metadata value type id.
type ValueType uint32

// GGUF metadata value types, with the ids the format stores.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

func (t ValueType) String() string {
	switch t {
	case TypeUint8:
		return "uint8"
	case TypeInt8:
		return "int8"
	case TypeUint16:
		return "uint16"
	case TypeInt16:
		return "int16"
	case TypeUint32:
		return "uint32"
	case TypeInt32:
		return "int32"
	case TypeFloat32:
		return "float32"
	case TypeBool:
		return "bool"
	case TypeString:
		return "string"
	case TypeArray:
		return "array"
	case TypeUint64:
		return "uint64"
	case TypeInt64:
		return "int64"
	case TypeFloat64:
		return "float64"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Valid reports whether t is one of the GGUF value types.
func (t ValueType) Valid() bool { return t <= TypeFloat64 }

// fixedSize is the encoded size of a scalar type; 0 for strings and arrays.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take; counts read from a
// file are capped with it before anything is allocated.
func (t ValueType) minSize() int64 {
	switch t {
	case TypeString:
		return 8 // length
	case TypeArray:
		return 12 // element type + count
	}
	return int64(t.fixedSize())
}

func (t ValueType) isInteger() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

func (t ValueType) isFloat() bool { return t == TypeFloat32 || t == TypeFloat64 }

// Value is one metadata value. Scalars keep their type; arrays keep their element type and
// hold their elements in one slice of the widest Go type of their kind, so a 150k-token
// vocabulary is one []string, not 150k Values.
type Value struct {
	Type     ValueType
	ElemType ValueType // element type, for arrays only

	bits uint64  // integers (signed ones sign-extended) and bools
	f    float64 // floats
	s    string

	// Array elements: exactly one of these is set, by ElemType's kind.
	ints    []uint64 // integer elements, signed ones sign-extended
	floats  []float64
	bools   []bool
	strs    []string
	arrays  []Value
	isArray bool
}

// Scalar constructors.

func NewUint8(v uint8) Value     { return Value{Type: TypeUint8, bits: uint64(v)} }
func NewInt8(v int8) Value       { return Value{Type: TypeInt8, bits: uint64(int64(v))} }
func NewUint16(v uint16) Value   { return Value{Type: TypeUint16, bits: uint64(v)} }
func NewInt16(v int16) Value     { return Value{Type: TypeInt16, bits: uint64(int64(v))} }
func NewUint32(v uint32) Value   { return Value{Type: TypeUint32, bits: uint64(v)} }
func NewInt32(v int32) Value     { return Value{Type: TypeInt32, bits: uint64(int64(v))} }
func NewUint64(v uint64) Value   { return Value{Type: TypeUint64, bits: v} }
func NewInt64(v int64) Value     { return Value{Type: TypeInt64, bits: uint64(v)} }
func NewFloat32(v float32) Value { return Value{Type: TypeFloat32, f: float64(v)} }
func NewFloat64(v float64) Value { return Value{Type: TypeFloat64, f: v} }
func NewString(s string) Value   { return Value{Type: TypeString, s: s} }
func NewBool(b bool) Value {
	v := Value{Type: TypeBool}
	if b {
		v.bits = 1
	}
	return v
}

// Array constructors. The slices are copied.

// NewStrings is an array of strings.
func NewStrings(ss []string) Value {
	return Value{Type: TypeArray, ElemType: TypeString, isArray: true, strs: append([]string{}, ss...)}
}

// NewBools is an array of bools.
func NewBools(bs []bool) Value {
	return Value{Type: TypeArray, ElemType: TypeBool, isArray: true, bools: append([]bool{}, bs...)}
}

// NewInt32s is an array of int32.
func NewInt32s(xs []int32) Value {
	v := Value{Type: TypeArray, ElemType: TypeInt32, isArray: true, ints: make([]uint64, len(xs))}
	for i, x := range xs {
		v.ints[i] = uint64(int64(x))
	}
	return v
}

// NewUint32s is an array of uint32.
func NewUint32s(xs []uint32) Value {
	v := Value{Type: TypeArray, ElemType: TypeUint32, isArray: true, ints: make([]uint64, len(xs))}
	for i, x := range xs {
		v.ints[i] = uint64(x)
	}
	return v
}

// NewInt64s is an array of int64.
func NewInt64s(xs []int64) Value {
	v := Value{Type: TypeArray, ElemType: TypeInt64, isArray: true, ints: make([]uint64, len(xs))}
	for i, x := range xs {
		v.ints[i] = uint64(x)
	}
	return v
}

// NewFloat32s is an array of float32.
func NewFloat32s(xs []float32) Value {
	v := Value{Type: TypeArray, ElemType: TypeFloat32, isArray: true, floats: make([]float64, len(xs))}
	for i, x := range xs {
		v.floats[i] = float64(x)
	}
	return v
}

// NewArray builds an array of any element type from scalar or array Values, which must
// all have type elem (checked; a mismatch is an error, not a silent conversion).
func NewArray(elem ValueType, elems []Value) (Value, error) {
	if !elem.Valid() {
		return Value{}, fmt.Errorf("gguf: array element type %d is not a GGUF type", uint32(elem))
	}
	v := Value{Type: TypeArray, ElemType: elem, isArray: true}
	for i, e := range elems {
		if e.Type != elem {
			return Value{}, fmt.Errorf("gguf: array of %s: element %d is %s", elem, i, e.Type)
		}
		switch {
		case elem.isInteger():
			v.ints = append(v.ints, e.bits)
		case elem == TypeBool:
			v.bools = append(v.bools, e.bits != 0)
		case elem.isFloat():
			v.floats = append(v.floats, e.f)
		case elem == TypeString:
			v.strs = append(v.strs, e.s)
		default:
			v.arrays = append(v.arrays, e)
		}
	}
	return v, nil
}

// Len is the number of elements of an array (0 for scalars).
func (v Value) Len() int {
	switch {
	case !v.isArray:
		return 0
	case v.ElemType.isInteger():
		return len(v.ints)
	case v.ElemType.isFloat():
		return len(v.floats)
	case v.ElemType == TypeBool:
		return len(v.bools)
	case v.ElemType == TypeString:
		return len(v.strs)
	}
	return len(v.arrays)
}

// Uint returns an integer value that fits in a uint64 (negative ones do not).
func (v Value) Uint() (uint64, bool) {
	if !v.Type.isInteger() {
		return 0, false
	}
	if v.Type.isSigned() && int64(v.bits) < 0 {
		return 0, false
	}
	return v.bits, true
}

// Int returns an integer value that fits in an int64.
func (v Value) Int() (int64, bool) {
	if !v.Type.isInteger() {
		return 0, false
	}
	if !v.Type.isSigned() && v.bits > math.MaxInt64 {
		return 0, false
	}
	return int64(v.bits), true
}

// Float returns a float value, or an integer one converted.
func (v Value) Float() (float64, bool) {
	switch {
	case v.Type.isFloat():
		return v.f, true
	case v.Type.isSigned():
		return float64(int64(v.bits)), true
	case v.Type.isInteger():
		return float64(v.bits), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) {
	if v.Type != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// Str returns a string value (named so it does not clash with fmt.Stringer's String).
func (v Value) Str() (string, bool) {
	if v.Type != TypeString {
		return "", false
	}
	return v.s, true
}

// Strings returns an array of strings. The slice is shared: do not modify it.
func (v Value) Strings() ([]string, bool) {
	if !v.isArray || v.ElemType != TypeString {
		return nil, false
	}
	return v.strs, true
}

// Ints returns an array of integers whose elements all fit in an int64.
func (v Value) Ints() ([]int64, bool) {
	if !v.isArray || !v.ElemType.isInteger() {
		return nil, false
	}
	out := make([]int64, len(v.ints))
	for i, b := range v.ints {
		if !v.ElemType.isSigned() && b > math.MaxInt64 {
			return nil, false
		}
		out[i] = int64(b)
	}
	return out, true
}

// Floats returns an array of floats, or of integers converted.
func (v Value) Floats() ([]float64, bool) {
	switch {
	case !v.isArray:
		return nil, false
	case v.ElemType.isFloat():
		return append([]float64{}, v.floats...), true
	case v.ElemType.isInteger():
		out := make([]float64, len(v.ints))
		for i, b := range v.ints {
			if v.ElemType.isSigned() {
				out[i] = float64(int64(b))
			} else {
				out[i] = float64(b)
			}
		}
		return out, true
	}
	return nil, false
}

// Bools returns an array of bools.
func (v Value) Bools() ([]bool, bool) {
	if !v.isArray || v.ElemType != TypeBool {
		return nil, false
	}
	return append([]bool{}, v.bools...), true
}

// Array returns the elements of any array as Values (nested arrays included).
func (v Value) Array() ([]Value, bool) {
	if !v.isArray {
		return nil, false
	}
	n := v.Len()
	out := make([]Value, n)
	for i := range n {
		out[i] = v.elem(i)
	}
	return out, true
}

// elem returns element i of an array as a Value.
func (v Value) elem(i int) Value {
	e := Value{Type: v.ElemType}
	switch {
	case v.ElemType.isInteger():
		e.bits = v.ints[i]
	case v.ElemType.isFloat():
		e.f = v.floats[i]
	case v.ElemType == TypeBool:
		if v.bools[i] {
			e.bits = 1
		}
	case v.ElemType == TypeString:
		e.s = v.strs[i]
	default:
		e = v.arrays[i]
	}
	return e
}

// Equal reports whether two values have the same type and contents.
func (v Value) Equal(w Value) bool {
	if v.Type != w.Type {
		return false
	}
	if v.Type != TypeArray {
		return v.bits == w.bits && v.s == w.s && (v.f == w.f || math.IsNaN(v.f) && math.IsNaN(w.f))
	}
	if v.ElemType != w.ElemType || v.Len() != w.Len() {
		return false
	}
	for i := range v.Len() {
		if !v.elem(i).Equal(w.elem(i)) {
			return false
		}
	}
	return true
}

// String formats the value for people (long arrays are elided).
func (v Value) String() string {
	switch {
	case v.Type == TypeString:
		return strconv.Quote(v.s)
	case v.Type == TypeBool:
		return strconv.FormatBool(v.bits != 0)
	case v.Type.isFloat():
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case v.Type.isSigned():
		return strconv.FormatInt(int64(v.bits), 10)
	case v.Type.isInteger():
		return strconv.FormatUint(v.bits, 10)
	case v.Type == TypeArray:
		const show = 8
		var b strings.Builder
		b.WriteString("[")
		n := v.Len()
		for i := 0; i < n && i < show; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.elem(i).String())
		}
		if n > show {
			fmt.Fprintf(&b, ", ... (%d %s)", n, v.ElemType)
		}
		b.WriteString("]")
		return b.String()
	}
	return fmt.Sprintf("<%s>", v.Type)
}
