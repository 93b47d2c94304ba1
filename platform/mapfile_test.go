package platform

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestMapReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.bin")
	want := bytes.Repeat([]byte("strata map "), 1000)
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	data, unmap, err := MapReadOnly(f, int64(len(want)))
	f.Close() // the mapping outlives the descriptor
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Error("mapped bytes differ from the file")
	}
	if err := unmap(); err != nil {
		t.Error(err)
	}
	if _, _, err := MapReadOnly(f, 0); err == nil {
		t.Error("size 0 mapped without an error")
	}
}
