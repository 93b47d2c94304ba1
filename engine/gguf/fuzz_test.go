package gguf

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to the parser Open uses. It must never panic, must
// report every failure as a *FormatError, and whatever it accepts must be self-consistent.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	for _, align := range []int64{0, 64} {
		b, err := os.ReadFile(writeSample(f, dir, align))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		for _, cut := range []int{4, 8, 20, 24, 40, len(b) / 3, len(b) / 2, len(b) - 33, len(b) - 1} {
			f.Add(b[:cut])
		}
	}
	f.Add(cat(head(0, 1), kvU32("general.alignment", 64)))
	f.Add(withData(cat(head(2, 0), tinfo("a", 0, 0, 16), tinfo("b", 0, 64, 4)), 96))
	f.Add(deepArray(4))

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parse("fuzz.gguf", data)
		if len(data) > 0 {
			// The unmapped open reads a growing prefix: it must reach the same result.
			first := int64(data[0]%64) + 1
			got, uerr := readHeader("fuzz.gguf", bytes.NewReader(data), int64(len(data)), first)
			switch {
			case (err == nil) != (uerr == nil) || err != nil && err.Error() != uerr.Error():
				t.Fatalf("prefix from %d bytes: error %v, the whole input gives %v", first, uerr, err)
			case err == nil && (!sameKV(got.KV, file.KV) || !reflect.DeepEqual(got.Tensors, file.Tensors) || got.DataOffset != file.DataOffset):
				t.Fatalf("prefix from %d bytes: the header differs from the whole input's", first)
			}
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			if fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("error offset %d outside the %d-byte input: %v", fe.Offset, len(data), err)
			}
			return
		}
		if file.DataOffset%file.Alignment != 0 {
			t.Fatalf("data offset %d not aligned to %d", file.DataOffset, file.Alignment)
		}
		for _, kv := range file.KV {
			v, ok := file.Lookup(kv.Key)
			if !ok || !v.Equal(kv.Value) {
				t.Fatalf("Lookup(%q) disagrees with KV", kv.Key)
			}
			_ = v.String()
			_, _ = v.Array()
		}
		for _, ti := range file.Tensors {
			if got, ok := file.Tensor(ti.Name); !ok || got.Offset != ti.Offset {
				t.Fatalf("Tensor(%q) disagrees with Tensors", ti.Name)
			}
			if d := file.TensorData(ti); int64(len(d)) != ti.Size {
				t.Fatalf("tensor %q: %d bytes of data, want %d", ti.Name, len(d), ti.Size)
			}
		}
	})
}

// sameKV compares two key lists by Value.Equal, for which a NaN equals a NaN (DeepEqual
// calls two NaN floats different: a fuzzed f32 key made the prefix check fail on that).
func sameKV(a, b []KV) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}
