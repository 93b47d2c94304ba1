package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"strata/engine/fixtures"
)

// prefixSizes are first reads for openUnmapped: tiny ones make the header grow inside
// every field; the default reads small files whole.
var prefixSizes = []int64{1, 7, 40, 1000, headerFirstRead}

// TestOpenUnmappedMalformed checks that every malformed header gives Open's error, whatever
// prefix the unmapped open starts from.
func TestOpenUnmappedMalformed(t *testing.T) {
	dir := t.TempDir()
	for i, c := range malformedCases() {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad"+string(rune('a'+i%26))+".gguf")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, want := Open(path)
			if want == nil {
				t.Fatal("Open accepted it")
			}
			for _, first := range prefixSizes {
				f, err := openUnmapped(path, first)
				if err == nil {
					f.Close()
					t.Fatalf("first read %d: opened", first)
				}
				var fe *FormatError
				if !errors.As(err, &fe) || err.Error() != want.Error() {
					t.Errorf("first read %d: error %q (%T), want Open's %q", first, err, err, want)
				}
			}
		})
	}
}

// sameHeader compares what OpenUnmapped and Open read from one file.
func sameHeader(t *testing.T, got, want *File) {
	t.Helper()
	if got.Version != want.Version || got.Alignment != want.Alignment || got.DataOffset != want.DataOffset || got.Size() != want.Size() {
		t.Errorf("version %d alignment %d data offset %d size %d, Open has %d %d %d %d",
			got.Version, got.Alignment, got.DataOffset, got.Size(), want.Version, want.Alignment, want.DataOffset, want.Size())
	}
	if !reflect.DeepEqual(got.KV, want.KV) {
		t.Errorf("%d keys differ from Open's %d", len(got.KV), len(want.KV))
	}
	if !reflect.DeepEqual(got.Tensors, want.Tensors) {
		t.Errorf("%d tensors differ from Open's %d", len(got.Tensors), len(want.Tensors))
	}
	for _, kv := range want.KV {
		if v, ok := got.Lookup(kv.Key); !ok || !reflect.DeepEqual(v, kv.Value) {
			t.Errorf("key %s: %v, Open has %v", kv.Key, v, kv.Value)
		}
	}
}

// checkMapLater checks that an unmapped File has no data until Map and then the same bytes
// as the mapped one.
func checkMapLater(t *testing.T, f, mapped *File) {
	t.Helper()
	if f.Mapped() || f.Mapping() != nil {
		t.Fatalf("unmapped open: Mapped %v, Mapping %d bytes", f.Mapped(), len(f.Mapping()))
	}
	for _, ti := range f.Tensors {
		if f.TensorData(ti) != nil {
			t.Fatalf("tensor %s has data before Map", ti.Name)
		}
	}
	for range 2 { // the second Map does nothing
		if err := f.Map(); err != nil {
			t.Fatal(err)
		}
		if !f.Mapped() || !bytes.Equal(f.Mapping(), mapped.Mapping()) {
			t.Fatalf("after Map: Mapped %v, %d bytes equal to Open's %d: %v", f.Mapped(), len(f.Mapping()), len(mapped.Mapping()), bytes.Equal(f.Mapping(), mapped.Mapping()))
		}
	}
	for _, ti := range f.Tensors {
		if !bytes.Equal(f.TensorData(ti), mapped.TensorData(ti)) || len(f.TensorData(ti)) != int(ti.Size) {
			t.Errorf("tensor %s: data differs from Open's after Map", ti.Name)
		}
	}
}

// TestOpenUnmappedFixtures opens every fixture GGUF both ways, from several first reads.
func TestOpenUnmappedFixtures(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(fixtures.Dir(t), "*", "*.gguf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no GGUF file in the fixtures (%v)", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			want, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			for _, first := range []int64{1000, headerFirstRead} {
				f, err := openUnmapped(path, first)
				if err != nil {
					t.Fatalf("first read %d: %v", first, err)
				}
				sameHeader(t, f, want)
				checkMapLater(t, f, want)
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestOpenUnmappedSample covers the writer's sample (every value type) from every first read.
func TestOpenUnmappedSample(t *testing.T) {
	path := writeSample(t, t.TempDir(), 64)
	want, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for _, first := range prefixSizes {
		f, err := openUnmapped(path, first)
		if err != nil {
			t.Fatalf("first read %d: %v", first, err)
		}
		sameHeader(t, f, want)
		checkMapLater(t, f, want)
		f.Close()
	}
	f, err := OpenUnmapped(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Map(); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Map after Close: %v", err)
	}
}

func TestOpenUnmappedErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenUnmapped(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenUnmapped(empty); err == nil || !strings.Contains(err.Error(), "empty file") || !strings.Contains(err.Error(), "empty.gguf") {
		t.Errorf("empty file: %v", err)
	}
	// The file grows between the header read and Map: the header no longer describes it.
	path := writeSample(t, dir, 0)
	f, err := OpenUnmapped(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Map(); err == nil || !strings.Contains(err.Error(), "changed after its header was read") || !strings.Contains(err.Error(), "sample.gguf") {
		t.Errorf("Map of a changed file: %v", err)
	}
	if f.Mapped() {
		t.Error("a refused Map left the file mapped")
	}
}
