package kv

import (
	"slices"
	"strings"
	"testing"
)

func TestStoreAndReadBack(t *testing.T) {
	for _, typ := range []Type{F16, F32} {
		c, err := New(2, 2, 4, 8, typ)
		if err != nil {
			t.Fatal(err)
		}
		k := []float32{1, 2, 3, 4, 5, 6, 7, 8, 0.5, -0.25, 9, 10, 11, 12, 13, 14}
		v := make([]float32, len(k))
		for i := range v {
			v[i] = -k[i]
		}
		c.Store(1, 3, 2, k, v) // positions 3 and 4 of layer 1
		got := make([]float32, 4)
		c.Key(1, 4, 0, got)
		for i, want := range []float32{0.5, -0.25, 9, 10} {
			if got[i] != want {
				t.Fatalf("%s: key(pos 4, head 0)[%d] = %v, want %v", typ, i, got[i], want)
			}
		}
		c.Key(1, 3, 1, got)
		for i, want := range []float32{5, 6, 7, 8} {
			if got[i] != want {
				t.Fatalf("%s: key(pos 3, head 1)[%d] = %v, want %v", typ, i, got[i], want)
			}
		}
		// The documented order: a head's positions one after another.
		if typ == F32 {
			at := c.HeadOffset(1, 1) + 4*4 // head 1, position 4
			if k, v := c.Keys32(1)[at:at+4], c.Values32(1)[at:at+4]; !slices.Equal(k, []float32{11, 12, 13, 14}) || !slices.Equal(v, []float32{-11, -12, -13, -14}) {
				t.Errorf("head 1, position 4 holds keys %v and values %v", k, v)
			}
		}
	}
}

func TestContextFor(t *testing.T) {
	per := Bytes(48, 4, 128, 1, F16) // 96 KiB per position for a 30B-A3B shape
	ctx, err := ContextFor(0, 40960, 48, 4, 128, F16, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if int64(ctx)*per > 1<<30 || ctx%256 != 0 || ctx < 8192 {
		t.Errorf("auto context %d (%d MiB) for a 1 GiB budget", ctx, int64(ctx)*per>>20)
	}
	if ctx, err := ContextFor(0, 4096, 48, 4, 128, F16, 8<<30); err != nil || ctx != 4096 {
		t.Errorf("small model context: %d, %v; want the model's 4096", ctx, err)
	}
	_, err = ContextFor(65536, 40960, 48, 4, 128, F16, 1<<30)
	if err == nil || !strings.Contains(err.Error(), "--max-context") {
		t.Errorf("too large a context: err = %v, want advice naming --max-context", err)
	}
	if _, err := ParseType("int8"); err == nil {
		t.Error("int8 accepted before it exists")
	}
}

// TestKeptLayersAreRings: a layer that keeps fewer positions holds the latest ones in a ring
// and costs only them; the others keep everything.
func TestKeptLayersAreRings(t *testing.T) {
	const layers, heads, dim, positions = 3, 2, 4, 100
	keep := []int{10, 0, 500}
	c, err := NewKept(layers, heads, dim, positions, F32, keep)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kept(0) != 10 || c.Kept(1) != positions || c.Kept(2) != positions {
		t.Fatalf("kept %d, %d, %d positions, want 10, 100, 100", c.Kept(0), c.Kept(1), c.Kept(2))
	}
	if want := Bytes(1, heads, dim, 10, F32) + Bytes(2, heads, dim, positions, F32); c.Bytes() != want || LayerBytes(layers, heads, dim, positions, F32, keep) != want {
		t.Fatalf("cache holds %d bytes, want %d", c.Bytes(), want)
	}
	row := make([]float32, heads*dim)
	for p := range 25 {
		for i := range row {
			row[i] = float32(p*100 + i)
		}
		c.Store(0, p, 1, row, row)
	}
	got := make([]float32, dim)
	for p := 15; p < 25; p++ { // the last ten are all there
		c.Key(0, p, 1, got)
		if got[0] != float32(p*100+dim) {
			t.Fatalf("position %d head 1 holds %v", p, got)
		}
	}
	if _, err := NewKept(2, heads, dim, positions, F32, []int{1, 2, 3}); err == nil {
		t.Error("three keep counts for two layers were accepted")
	}
}
