package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/quant"
)

// sampleValues has every value type, arrays of every element type and nested arrays.
func sampleValues(t testing.TB) []KV {
	t.Helper()
	nested := func(elem ValueType, vs ...Value) Value {
		v, err := NewArray(elem, vs)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	inner1 := nested(TypeInt16, NewInt16(-3), NewInt16(7))
	inner2 := nested(TypeInt16)
	deep := nested(TypeArray, nested(TypeArray, nested(TypeString, NewString("x"), NewString("ÿ"))))
	return []KV{
		{"general.architecture", NewString("testarch")},
		{"u8", NewUint8(255)},
		{"i8", NewInt8(-128)},
		{"u16", NewUint16(65535)},
		{"i16", NewInt16(-32768)},
		{"u32", NewUint32(math.MaxUint32)},
		{"i32", NewInt32(math.MinInt32)},
		{"f32", NewFloat32(1e-6)},
		{"bool.t", NewBool(true)},
		{"bool.f", NewBool(false)},
		{"str", NewString("héllo\x00world")},
		{"str.empty", NewString("")},
		{"u64", NewUint64(math.MaxUint64)},
		{"i64", NewInt64(math.MinInt64)},
		{"f64", NewFloat64(math.Pi)},
		{"testarch.block_count", NewUint32(48)},
		{"testarch.rope.freq_base", NewFloat32(1e6)},
		{"arr.u8", nested(TypeUint8, NewUint8(1), NewUint8(2))},
		{"arr.i8", nested(TypeInt8, NewInt8(-1))},
		{"arr.u16", nested(TypeUint16, NewUint16(9))},
		{"arr.i16", nested(TypeInt16, NewInt16(-9), NewInt16(9))},
		{"arr.u32", NewUint32s([]uint32{1, 2, 3})},
		{"arr.i32", NewInt32s([]int32{-1, 0, 1})},
		{"arr.f32", NewFloat32s([]float32{0.5, -2, float32(math.Inf(1))})},
		{"arr.bool", NewBools([]bool{true, false, true})},
		{"arr.str", NewStrings([]string{"a", "", "<|im_end|>"})},
		{"arr.u64", nested(TypeUint64, NewUint64(math.MaxUint64))},
		{"arr.i64", NewInt64s([]int64{math.MinInt64, 5})},
		{"arr.f64", nested(TypeFloat64, NewFloat64(-0.25))},
		{"arr.empty", NewStrings(nil)},
		{"arr.nested", nested(TypeArray, inner1, inner2)},
		{"arr.deep", deep},
	}
}

type sampleTensor struct {
	name string
	typ  quant.Type
	ne   []int64
}

func sampleTensors() []sampleTensor {
	return []sampleTensor{
		{"token_embd.weight", quant.F32, []int64{8, 3}},
		{"blk.0.attn_q.weight", quant.F16, []int64{32, 2}},
		{"blk.0.ffn_up_exps.weight", quant.Q4_K, []int64{256, 2, 3}},
		{"blk.0.ffn_down_exps.weight", quant.Q8_0, []int64{64, 1, 1, 2}},
		{"blk.0.ffn_gate_exps.weight", quant.MXFP4, []int64{32, 5}},
		{"output_norm.weight", quant.F32, []int64{7}},
	}
}

// tensorBytes is deterministic filler for tensor i.
func tensorBytes(i int, size int64) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return b
}

// writeSample writes sampleValues and sampleTensors to dir and returns the path.
func writeSample(t testing.TB, dir string, alignment int64) string {
	t.Helper()
	w := NewWriter()
	if alignment != 0 {
		w.SetAlignment(alignment)
	}
	for _, kv := range sampleValues(t) {
		w.Add(kv.Key, kv.Value)
	}
	for i, st := range sampleTensors() {
		size := sizeOf(t, st.typ, st.ne)
		err := w.AddTensor(st.name, st.typ, st.ne, func(out io.Writer) error {
			// Write in two pieces to check the writer counts across calls.
			b := tensorBytes(i, size)
			if _, err := out.Write(b[:len(b)/2]); err != nil {
				return err
			}
			_, err := out.Write(b[len(b)/2:])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "sample.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func sizeOf(t testing.TB, typ quant.Type, ne []int64) int64 {
	t.Helper()
	rows := int64(1)
	for _, n := range ne[1:] {
		rows *= n
	}
	rb, err := quant.RowBytes(typ, int(ne[0]))
	if err != nil {
		t.Fatal(err)
	}
	return rows * int64(rb)
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []int64{0, 64, 4096} {
		dir := t.TempDir()
		path := writeSample(t, dir, align)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		wantAlign := align
		if align == 0 {
			wantAlign = 32
		}
		if f.Version != 3 || f.Alignment != wantAlign || f.DataOffset%wantAlign != 0 {
			t.Errorf("align %d: version %d alignment %d data offset %d", align, f.Version, f.Alignment, f.DataOffset)
		}
		want := sampleValues(t)
		if align > 0 && align != 32 {
			want = append(want, KV{"general.alignment", NewUint32(uint32(align))})
		}
		if len(f.KV) != len(want) {
			t.Fatalf("align %d: %d keys, want %d", align, len(f.KV), len(want))
		}
		for i, kv := range want {
			got := f.KV[i]
			if got.Key != kv.Key || !got.Value.Equal(kv.Value) {
				t.Errorf("key %d: got %s=%s (%s), want %s=%s (%s)", i, got.Key, got.Value, got.Value.Type, kv.Key, kv.Value, kv.Value.Type)
			}
			if v, ok := f.Lookup(kv.Key); !ok || !v.Equal(kv.Value) {
				t.Errorf("Lookup(%q) = %s, %v", kv.Key, v, ok)
			}
		}
		sts := sampleTensors()
		if len(f.Tensors) != len(sts) {
			t.Fatalf("%d tensors, want %d", len(f.Tensors), len(sts))
		}
		for i, st := range sts {
			ti, ok := f.Tensor(st.name)
			if !ok || ti.Name != f.Tensors[i].Name {
				t.Fatalf("tensor %q missing or out of order", st.name)
			}
			if ti.Type != st.typ || !equalInts(ti.Ne, st.ne) || ti.Offset%wantAlign != 0 {
				t.Errorf("tensor %q: %s %v at %d, want %s %v aligned to %d", st.name, ti.Type, ti.Ne, ti.Offset, st.typ, st.ne, wantAlign)
			}
			size := sizeOf(t, st.typ, st.ne)
			if ti.Size != size || !bytes.Equal(f.TensorData(ti), tensorBytes(i, size)) {
				t.Errorf("tensor %q: data differs (size %d, want %d)", st.name, ti.Size, size)
			}
		}
		if got := len(f.Mapping()); int64(got) != fileSize(t, path)-f.DataOffset {
			t.Errorf("Mapping() is %d bytes", got)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if f.TensorData(f.Tensors[0]) != nil {
			t.Error("TensorData after Close is not nil")
		}
		if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
			t.Errorf("temporary file left behind: %v", err)
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriterErrors(t *testing.T) {
	one := func(n int) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(make([]byte, n)); return err }
	}
	cases := []struct {
		name  string
		build func(w *Writer) error // the AddTensor error, if any
		want  string
	}{
		{"short write", func(w *Writer) error { return w.AddTensor("a", quant.F32, []int64{4}, one(12)) }, "produced 12 bytes, want 16"},
		{"long write", func(w *Writer) error { return w.AddTensor("a", quant.F32, []int64{4}, one(20)) }, "overruns"},
		{"callback error", func(w *Writer) error {
			return w.AddTensor("a", quant.F32, []int64{4}, func(io.Writer) error { return errors.New("boom") })
		}, "boom"},
		{"duplicate tensor", func(w *Writer) error {
			_ = w.AddTensor("a", quant.F32, []int64{4}, one(16))
			return w.AddTensor("a", quant.F32, []int64{4}, one(16))
		}, "duplicate tensor name"},
		{"unknown type", func(w *Writer) error { return w.AddTensor("a", quant.Type(99), []int64{4}, one(16)) }, "unknown type"},
		{"partial block", func(w *Writer) error { return w.AddTensor("a", quant.Q4_K, []int64{100}, one(16)) }, "whole number"},
		{"zero dim", func(w *Writer) error { return w.AddTensor("a", quant.F32, []int64{4, 0}, one(16)) }, "ne[1] = 0"},
		{"five dims", func(w *Writer) error { return w.AddTensor("a", quant.F32, []int64{1, 1, 1, 1, 1}, one(4)) }, "5 dimensions"},
		{"overflow", func(w *Writer) error {
			return w.AddTensor("a", quant.F32, []int64{1 << 40, 1 << 30}, one(4))
		}, "overflows"},
		{"duplicate key", func(w *Writer) error { w.AddString("k", "a"); w.AddUint32("k", 1); return nil }, "duplicate metadata key"},
		{"empty key", func(w *Writer) error { w.AddBool("", true); return nil }, "empty metadata key"},
		{"bad alignment", func(w *Writer) error { w.SetAlignment(48); return nil }, "power of two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWriter()
			addErr := c.build(w)
			path := filepath.Join(t.TempDir(), "x.gguf")
			err := w.WriteFile(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("WriteFile error %v, want %q (AddTensor said %v)", err, c.want, addErr)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Error("failed write left the final file")
			}
			if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
				t.Error("failed write left the temporary file")
			}
		})
	}
}

func TestNewArrayRejectsMixedTypes(t *testing.T) {
	if _, err := NewArray(TypeUint32, []Value{NewUint32(1), NewInt32(2)}); err == nil {
		t.Fatal("mixed element types accepted")
	}
	if _, err := NewArray(ValueType(13), nil); err == nil {
		t.Fatal("element type 13 accepted")
	}
}
