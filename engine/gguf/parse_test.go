package gguf

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Raw header pieces, for files the writer would refuse to make.

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func gstr(s string) []byte { return append(le64(uint64(len(s))), s...) }
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// head is magic, version 3 and the two counts (24 bytes).
func head(nTensors, nKV uint64) []byte {
	return cat([]byte("GGUF"), le32(3), le64(nTensors), le64(nKV))
}

// kvU32 is a uint32 metadata pair.
func kvU32(key string, v uint32) []byte { return cat(gstr(key), le32(uint32(TypeUint32)), le32(v)) }

// tinfo is a tensor info.
func tinfo(name string, typ uint32, off uint64, ne ...uint64) []byte {
	b := cat(gstr(name), le32(uint32(len(ne))))
	for _, n := range ne {
		b = append(b, le64(n)...)
	}
	return cat(b, le32(typ), le64(off))
}

// withData pads the header to 32 and appends n bytes of data.
func withData(h []byte, n int) []byte {
	for len(h)%32 != 0 {
		h = append(h, 0)
	}
	return append(h, make([]byte, n)...)
}

// malformedCase is a header the parser must refuse: the error it must contain and where.
type malformedCase struct {
	name    string
	data    []byte
	want    string
	wantOff int64 // -1: not checked
}

// malformedCases are shared by the parse and the unmapped open tests.
func malformedCases() []malformedCase {
	const f32, q4k = 0, 12
	return []malformedCase{
		{"empty", nil, "truncated: magic", 0},
		{"short magic", []byte("GG"), "truncated: magic", 0},
		{"bad magic", cat([]byte("GGML"), le32(3)), "bad magic", 0},
		{"truncated version", []byte("GGUF\x03"), "truncated: version", 4},
		{"version 1", cat([]byte("GGUF"), le32(1), le32(0), le32(0)), "unsupported GGUF version 1", 4},
		{"version 7", cat([]byte("GGUF"), le32(7), le64(0), le64(0)), "unsupported GGUF version 7", 4},
		{"big-endian", cat([]byte("GGUF"), []byte{0, 0, 0, 3}, make([]byte, 16)), "big-endian", 4},
		{"truncated counts", cat([]byte("GGUF"), le32(3), le64(0)), "truncated: metadata key count", 16},
		{"absurd tensor count", cat(head(1<<40, 0), make([]byte, 100)), "tensor count 1099511627776 is absurd", 8},
		{"absurd key count", cat(head(0, 1<<60), make([]byte, 100)), "metadata key count", 16},
		{"absurd key length", cat(head(0, 1), le64(1<<62), make([]byte, 20)), "key 0 length", 24},
		{"empty key", cat(head(0, 1), gstr(""), le32(4), le32(1)), "key 0 is empty", 24},
		{"duplicate key", cat(head(0, 2), kvU32("a", 1), kvU32("a", 2)), "duplicate key \"a\"", 24 + 17},
		{"unknown value type", cat(head(0, 1), gstr("k"), le32(13), le32(0)), "unknown value type 13", 33},
		{"truncated value", cat(head(0, 1), gstr("k"), le32(uint32(TypeUint64)), le32(0)), "truncated", 37},
		{"bad bool", cat(head(0, 1), gstr("k"), le32(uint32(TypeBool)), []byte{2}), "bool byte is 2", 37},
		{"absurd string", cat(head(0, 1), gstr("k"), le32(uint32(TypeString)), le64(1<<40), []byte("abc")), "past the end", 37},
		{"unknown array type", cat(head(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(99), le64(0)), "unknown array element type 99", 37},
		{"absurd array count", cat(head(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(uint32(TypeUint32)), le64(1<<40), make([]byte, 64)),
			"element count 1099511627776 is absurd", 41},
		{"absurd string array", cat(head(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(uint32(TypeString)), le64(100), le64(1<<50)),
			"element count 100 is absurd", 41},
		{"truncated string array", cat(head(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(uint32(TypeString)), le64(2), gstr("x"), le64(30), make([]byte, 10)),
			"k\"[1] length 30 is past the end", 58},
		{"array beyond the limit", cat(head(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(uint32(TypeUint8)), le64(maxArrayLen+1), make([]byte, maxArrayLen+8)),
			"16777217 elements is beyond the limit", 41},
		{"too deep", deepArray(maxNesting + 1), "nested more than", -1},
		{"alignment not a power of two", cat(head(0, 1), kvU32("general.alignment", 48)), "general.alignment is 48", 53},
		{"alignment zero", cat(head(0, 1), kvU32("general.alignment", 0)), "general.alignment is 0", 53},
		{"alignment string", cat(head(0, 1), gstr("general.alignment"), le32(uint32(TypeString)), gstr("32")), "general.alignment is \"32\"", 53},
		{"tensor empty name", withData(cat(head(1, 0), tinfo("", f32, 0, 4)), 16), "name is empty", 24},
		{"tensor zero dims", withData(cat(head(1, 0), tinfo("t", f32, 0)), 16), "0 dimensions", 33},
		{"tensor five dims", withData(cat(head(1, 0), tinfo("t", f32, 0, 1, 1, 1, 1, 1)), 16), "5 dimensions", 33},
		{"tensor zero ne", withData(cat(head(1, 0), tinfo("t", f32, 0, 4, 0)), 16), "ne[1] = 0", 45},
		{"tensor huge ne", withData(cat(head(1, 0), tinfo("t", f32, 0, 1<<63)), 16), "ne[0] = 9223372036854775808", 37},
		{"tensor element overflow", withData(cat(head(1, 0), tinfo("t", f32, 0, 1<<40, 1<<40)), 16), "element count overflows", 45},
		{"tensor byte overflow", withData(cat(head(1, 0), tinfo("t", f32, 0, 1<<31, 1<<31)), 16), "byte size overflows", 33},
		{"unknown tensor type", withData(cat(head(1, 0), tinfo("t", 5, 0, 4)), 16), "unknown tensor type 5", 45},
		{"partial block", withData(cat(head(1, 0), tinfo("t", q4k, 0, 100)), 144), "not a whole number of 256-value blocks", 33},
		{"misaligned offset", withData(cat(head(2, 0), tinfo("a", f32, 0, 4), tinfo("b", f32, 16, 4)), 64), "not a multiple of the alignment 32", 24 + 33 + 25},
		{"duplicate tensor", withData(cat(head(2, 0), tinfo("a", f32, 0, 4), tinfo("a", f32, 32, 4)), 64), "duplicate tensor name \"a\"", 24 + 33},
		{"out of bounds", withData(cat(head(1, 0), tinfo("t", f32, 0, 64)), 100), "out of bounds", 24},
		{"offset out of bounds", withData(cat(head(1, 0), tinfo("t", f32, 1<<40, 4)), 100), "out of bounds", 24},
		{"overlap", withData(cat(head(2, 0), tinfo("a", f32, 0, 16), tinfo("b", f32, 32, 4)), 64), "tensor \"b\": bytes [32, 48) overlap tensor \"a\" at [0, 64)", 24 + 33},
		{"data section missing", cat(head(1, 0), tinfo("t", f32, 0, 4)), "data section starts at 64, past the end", -1},
	}
}

func TestMalformed(t *testing.T) {
	for _, c := range malformedCases() {
		t.Run(c.name, func(t *testing.T) {
			f, err := parse("bad.gguf", c.data)
			if err == nil {
				t.Fatalf("parsed: %d keys, %d tensors", len(f.KV), len(f.Tensors))
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.gguf") {
				t.Errorf("error %q, want it to contain %q and the file name", err, c.want)
			}
			if c.wantOff >= 0 && fe.Offset != c.wantOff {
				t.Errorf("error at offset %d, want %d (%v)", fe.Offset, c.wantOff, err)
			}
		})
	}
}

// deepArray is a key holding arrays nested n deep.
func deepArray(n int) []byte {
	b := cat(head(0, 1), gstr("k"), le32(uint32(TypeArray)))
	for range n {
		b = cat(b, le32(uint32(TypeArray)), le64(1))
	}
	return cat(b, le32(uint32(TypeUint8)), le64(0))
}

func TestValidEdgeCases(t *testing.T) {
	// No tensors and no padding after the header is a valid file.
	f, err := parse("x", cat(head(0, 1), kvU32("general.alignment", 64)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || len(f.Mapping()) != 0 {
		t.Errorf("alignment %d, mapping %d bytes", f.Alignment, len(f.Mapping()))
	}
	// GGUF v2 has the same layout as v3.
	v2 := withData(cat([]byte("GGUF"), le32(2), le64(1), le64(0), tinfo("t", 0, 0, 4)), 16)
	f, err = parse("x", v2)
	if err != nil {
		t.Fatal(err)
	}
	if ti, ok := f.Tensor("t"); !ok || f.Version != 2 || ti.Size != 16 || ti.Elements() != 4 || len(f.TensorData(ti)) != 16 {
		t.Errorf("v2: %+v", f)
	}
	// A foreign TensorInfo must not index outside the mapping.
	if f.TensorData(TensorInfo{Offset: 1 << 40, Size: 4}) != nil || f.TensorData(TensorInfo{Offset: 0, Size: 1 << 62}) != nil {
		t.Error("TensorData of a foreign tensor is not nil")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty file") {
		t.Errorf("empty file: %v", err)
	}
	// A truncated real file: cut the sample in the middle of its data.
	path := writeSample(t, dir, 0)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.gguf")
	if err := os.WriteFile(cut, b[:len(b)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cut); err == nil || !strings.Contains(err.Error(), "out of bounds") || !strings.Contains(err.Error(), "cut.gguf") {
		t.Errorf("truncated file: %v", err)
	}
}

func TestAccessors(t *testing.T) {
	f, err := Open(writeSample(t, t.TempDir(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Architecture() != "testarch" {
		t.Errorf("Architecture = %q", f.Architecture())
	}
	if n, err := f.ArchUint("block_count"); err != nil || n != 48 {
		t.Errorf("ArchUint = %d, %v", n, err)
	}
	if n, err := f.ArchUintOr("expert_count", 7); err != nil || n != 7 {
		t.Errorf("ArchUintOr default = %d, %v", n, err)
	}
	if x, err := f.ArchFloat("rope.freq_base"); err != nil || x != 1e6 {
		t.Errorf("ArchFloat = %g, %v", x, err)
	}
	if x, err := f.ArchFloatOr("rope.freq_base", 5); err != nil || x != 1e6 {
		t.Errorf("ArchFloatOr present = %g, %v", x, err)
	}
	if b, err := f.GetBool("bool.t"); err != nil || !b {
		t.Errorf("GetBool = %v, %v", b, err)
	}
	if ss, err := f.GetStrings("arr.str"); err != nil || len(ss) != 3 || ss[2] != "<|im_end|>" {
		t.Errorf("GetStrings = %v, %v", ss, err)
	}
	if u, err := f.GetUint("u16"); err != nil || u != 65535 {
		t.Errorf("GetUint = %d, %v", u, err)
	}
	if x, err := f.GetFloat("i8"); err != nil || x != -128 {
		t.Errorf("GetFloat of an int = %g, %v", x, err)
	}
	errCases := []struct {
		name string
		err  error
		want string
	}{
		{"missing", func() error { _, err := f.GetString("nope"); return err }(), `"nope" is missing`},
		{"wrong type", func() error { _, err := f.GetString("u8"); return err }(), `"u8" is uint8 255, want a string`},
		{"negative as uint", func() error { _, err := f.GetUint("i8"); return err }(), "want a non-negative integer"},
		{"string as float", func() error { _, err := f.GetFloat("str"); return err }(), "want a number"},
		{"int as bool", func() error { _, err := f.GetBool("u32"); return err }(), "want a bool"},
		{"ints as strings", func() error { _, err := f.GetStrings("arr.i32"); return err }(), "want an array of strings"},
		{"Or with wrong type", func() error { _, err := f.ArchUintOr("rope.freq_base", 1); return err }(), "testarch.rope.freq_base"},
	}
	for _, c := range errCases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) || !strings.Contains(c.err.Error(), "sample.gguf") {
			t.Errorf("%s: error %v, want %q and the file name", c.name, c.err, c.want)
		}
	}
}
