package gguf

import (
	"math"
	"testing"
)

func TestValueAccessors(t *testing.T) {
	type want struct {
		u     uint64
		uok   bool
		i     int64
		iok   bool
		f     float64
		fok   bool
		s     string
		sok   bool
		b, bk bool
	}
	cases := []struct {
		name string
		v    Value
		w    want
	}{
		{"uint8", NewUint8(200), want{u: 200, uok: true, i: 200, iok: true, f: 200, fok: true}},
		{"int8 negative", NewInt8(-5), want{i: -5, iok: true, f: -5, fok: true}},
		{"int32 positive", NewInt32(7), want{u: 7, uok: true, i: 7, iok: true, f: 7, fok: true}},
		{"uint64 max", NewUint64(math.MaxUint64), want{u: math.MaxUint64, uok: true, f: math.MaxUint64, fok: true}},
		{"int64 min", NewInt64(math.MinInt64), want{i: math.MinInt64, iok: true, f: math.MinInt64, fok: true}},
		{"float32", NewFloat32(0.5), want{f: 0.5, fok: true}},
		{"float64", NewFloat64(-2.25), want{f: -2.25, fok: true}},
		{"bool", NewBool(true), want{b: true, bk: true}},
		{"string", NewString("qwen3moe"), want{s: "qwen3moe", sok: true}},
		{"array", NewUint32s([]uint32{1}), want{}},
	}
	for _, c := range cases {
		u, uok := c.v.Uint()
		i, iok := c.v.Int()
		f, fok := c.v.Float()
		s, sok := c.v.Str()
		b, bk := c.v.Bool()
		got := want{u, uok, i, iok, f, fok, s, sok, b, bk}
		if got != c.w {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.w)
		}
	}
}

func TestArrayAccessors(t *testing.T) {
	ints := NewInt32s([]int32{-1, 2})
	if xs, ok := ints.Ints(); !ok || len(xs) != 2 || xs[0] != -1 || xs[1] != 2 {
		t.Errorf("Ints = %v, %v", xs, ok)
	}
	if xs, ok := ints.Floats(); !ok || xs[0] != -1 {
		t.Errorf("Floats of ints = %v, %v", xs, ok)
	}
	if _, ok := ints.Strings(); ok {
		t.Error("Strings of an int array succeeded")
	}
	big, _ := NewArray(TypeUint64, []Value{NewUint64(math.MaxUint64)})
	if _, ok := big.Ints(); ok {
		t.Error("Ints accepted a uint64 that does not fit in int64")
	}
	ss := NewStrings([]string{"a", "b"})
	if xs, ok := ss.Strings(); !ok || len(xs) != 2 || xs[1] != "b" {
		t.Errorf("Strings = %v, %v", xs, ok)
	}
	if _, ok := ss.Ints(); ok {
		t.Error("Ints of a string array succeeded")
	}
	nested, err := NewArray(TypeArray, []Value{ints, ss})
	if err != nil {
		t.Fatal(err)
	}
	elems, ok := nested.Array()
	if !ok || len(elems) != 2 || !elems[0].Equal(ints) || !elems[1].Equal(ss) {
		t.Errorf("Array = %v, %v", elems, ok)
	}
	if nested.Len() != 2 || ints.Len() != 2 || NewUint8(1).Len() != 0 {
		t.Error("Len is wrong")
	}
	if s := NewStrings(make([]string, 20)).String(); len(s) > 100 {
		t.Errorf("String of a long array is not elided: %s", s)
	}
}
