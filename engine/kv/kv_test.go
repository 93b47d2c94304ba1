package kv

import (
	"math"
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
	for in, want := range map[string]Type{"int8": Int8, "INT8": Int8, "": F16, "f16": F16} {
		if got, err := ParseType(in); err != nil || got != want {
			t.Errorf("ParseType(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseType("q4"); err == nil {
		t.Error("ParseType(q4) accepted")
	}
}

// TestInt8Cache: an int8 cache stores each block of kv.BlockSize values with the scale
// max|x|/127, reads back within half a step, costs 1 byte a value plus 4 per block (a 30b-a3b
// shape: 54 KiB a position against f16's 96), and keeps a ring's latest positions.
func TestInt8Cache(t *testing.T) {
	const layers, heads, dim, positions = 2, 2, 64, 9
	c, err := NewKept(layers, heads, dim, positions, Int8, []int{0, 4})
	if err != nil {
		t.Fatal(err)
	}
	row := heads * dim
	k, v := make([]float32, positions*row), make([]float32, positions*row)
	for i := range k {
		k[i] = float32(math.Sin(float64(i)*0.37)) * float32(1+i%7)
		v[i] = float32(math.Cos(float64(i)*0.11)) * 0.01
	}
	k[5] = 0 // a block may hold zeros; one below is all zeros
	for i := range BlockSize(dim) {
		k[row+dim+i] = 0
	}
	for l := range layers {
		for p := range positions {
			c.Store(l, p, 1, k[p*row:(p+1)*row], v[p*row:(p+1)*row])
		}
	}
	got := make([]float32, dim)
	for l := range layers {
		for p := positions - c.Kept(l); p < positions; p++ {
			for h := range heads {
				c.Key(l, p, h, got)
				src := k[p*row+h*dim : p*row+(h+1)*dim]
				for b0 := 0; b0 < dim; b0 += BlockSize(dim) {
					var amax float64
					for _, x := range src[b0 : b0+BlockSize(dim)] {
						amax = math.Max(amax, math.Abs(float64(x)))
					}
					for i := b0; i < b0+BlockSize(dim); i++ {
						if d := math.Abs(float64(got[i] - src[i])); d > amax/254*1.0001 {
							t.Fatalf("layer %d position %d head %d: key[%d] = %g, stored %g (step %g)", l, p, h, i, got[i], src[i], amax/127)
						}
					}
				}
			}
		}
	}
	if want := int64(2 * heads * (dim + 4*dim/BlockSize(dim)) * (positions + 4)); c.Bytes() != want {
		t.Errorf("cache holds %d bytes, want %d", c.Bytes(), want)
	}
	if per, f16 := Bytes(48, 4, 128, 1, Int8), Bytes(48, 4, 128, 1, F16); per != 54<<10 || f16 != 96<<10 {
		t.Errorf("30b-a3b KV per position: int8 %d, f16 %d bytes", per, f16)
	}
	if BlockSize(40) != 40 || BlockSize(96) != 32 {
		t.Errorf("block sizes: %d for 40 dims, %d for 96", BlockSize(40), BlockSize(96))
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
