// Package kv sizes key/value caches and holds them in host memory for the CPU backend. Keys
// and values are stored per layer as [kv head][position][head dim], in float16 by default
// (float32 as the reference, int8 with a scale per block for long contexts).
package kv

import (
	"fmt"
	"math"
	"strings"

	"strata/engine/quant"
)

// Type is the element format of the cache.
type Type string

// Cache element formats.
const (
	F16  Type = "f16"
	F32  Type = "f32"
	Int8 Type = "int8"
)

// Int8Block is how many consecutive values of a head's row share one float32 scale in an
// int8 cache: 32, as ggml's q8_0 (what llama.cpp's -ctk q8_0 stores), so the error is the
// same a peer's int8 cache has. A key row's channels differ in size by tens of times (RoPE
// pairs, outlier dims); a scale per whole row would give the small ones a few levels, a
// block of 32 keeps each block's own range, and its scale costs 4 bytes per 32 (1.125 bytes
// a value in all). Head dims are multiples of 32 in every supported model; a head of
// another size takes one block per row.
const Int8Block = 32

// ParseType maps the --kv flag's value.
func ParseType(s string) (Type, error) {
	switch strings.ToLower(s) {
	case "", "f16":
		return F16, nil
	case "f32":
		return F32, nil
	case "int8":
		return Int8, nil
	}
	return "", fmt.Errorf("kv: unknown cache type %q (want f16 or int8)", s)
}

// BlockSize is the values per scale of an int8 cache's rows of headDim values.
func BlockSize(headDim int) int {
	if headDim%Int8Block == 0 {
		return Int8Block
	}
	return headDim
}

// RowBytes is the memory one head's key (or value) row of headDim values takes in t.
func (t Type) RowBytes(headDim int) int64 {
	switch t {
	case F32:
		return 4 * int64(headDim)
	case Int8:
		return int64(headDim) + 4*int64(headDim/BlockSize(headDim))
	}
	return 2 * int64(headDim)
}

// Bytes is the memory a cache of this shape needs: keys and values for every layer.
func Bytes(layers, kvHeads, headDim, positions int, t Type) int64 {
	return 2 * int64(layers) * int64(kvHeads) * int64(positions) * t.RowBytes(headDim)
}

// Kept is how many positions a layer that needs keep of them (0: all) holds in a cache of
// positions.
func Kept(keep, positions int) int {
	if keep <= 0 || keep > positions {
		return positions
	}
	return keep
}

// LayerBytes is Bytes with each layer holding only the positions keep asks of it (see
// New's keep); nil keep is Bytes.
func LayerBytes(layers, kvHeads, headDim, positions int, t Type, keep []int) int64 {
	if keep == nil {
		return Bytes(layers, kvHeads, headDim, positions, t)
	}
	var n int64
	for l := range layers {
		k := 0
		if l < len(keep) {
			k = keep[l]
		}
		n += Bytes(1, kvHeads, headDim, Kept(k, positions), t)
	}
	return n
}

// ContextFor picks a context length: the requested one, or the model's, capped so the cache
// fits in budget bytes. It never returns less than minimum unless even that does not fit, which
// is an error saying what to change.
func ContextFor(requested, modelContext, layers, kvHeads, headDim int, t Type, budget int64) (int, error) {
	const minimum = 256
	perPos := Bytes(layers, kvHeads, headDim, 1, t)
	ctx := requested
	if ctx <= 0 {
		ctx = modelContext
		if ctx <= 0 {
			ctx = 4096
		}
		if budget > 0 && perPos > 0 && int64(ctx)*perPos > budget {
			ctx = int(budget / perPos)
			ctx -= ctx % 256
		}
	}
	if budget > 0 && int64(ctx)*perPos > budget {
		fits := budget / perPos
		return 0, fmt.Errorf("kv: a context of %d tokens needs %d MiB of KV cache but only %d MiB are free; try --max-context %d",
			ctx, int64(ctx)*perPos>>20, budget>>20, max(fits-fits%256, minimum))
	}
	if ctx < minimum && (requested <= 0) {
		return 0, fmt.Errorf("kv: only %d MiB free for the KV cache, less than %d tokens need; free memory or lower other budgets", budget>>20, minimum)
	}
	return ctx, nil
}

// Cache is a host-memory KV cache. Each layer holds its KV heads one after another, and
// each head its positions in order (head h, position p at (h*Kept(layer) + p) * headDim), so
// attention reads one head's keys and values as two contiguous streams. Interleaved by
// position, a head's rows were headDim of every kvHeads*headDim values: a 30b-a3b decode
// step's attention at 600 positions took 17.7 ms that way and 13.1-14.5 ms this way, at
// 2048 positions 58 and 45-56 ms (BenchmarkAttentionDecode, 2-core VM).
type Cache struct {
	typ       Type
	layers    int
	kvHeads   int
	headDim   int
	positions int
	kept      []int      // per layer: positions held; a layer that keeps fewer than positions is a ring (position p in slot p % kept)
	k16, v16  [][]uint16 // per layer, when F16
	k32, v32  [][]float32
	// When Int8: per layer the values, in the order above, and one scale per block of
	// BlockSize values (the value at index i has scale i/block).
	k8, v8 [][]int8
	ks, vs [][]float32
	block  int
}

// New allocates a cache for positions tokens.
func New(layers, kvHeads, headDim, positions int, t Type) (*Cache, error) {
	return NewKept(layers, kvHeads, headDim, positions, t, nil)
}

// NewKept allocates a cache for positions tokens in which layer l holds only the latest
// keep[l] positions (0 or a missing entry: all), as a ring: a sliding-window layer needs no
// more than its window and the batch being added.
func NewKept(layers, kvHeads, headDim, positions int, t Type, keep []int) (*Cache, error) {
	if layers <= 0 || kvHeads <= 0 || headDim <= 0 || positions <= 0 {
		return nil, fmt.Errorf("kv: bad cache shape %d layers x %d heads x %d dims x %d positions", layers, kvHeads, headDim, positions)
	}
	if len(keep) > layers {
		return nil, fmt.Errorf("kv: %d per-layer position counts for %d layers", len(keep), layers)
	}
	c := &Cache{typ: t, layers: layers, kvHeads: kvHeads, headDim: headDim, positions: positions, kept: make([]int, layers)}
	for l := range layers {
		k := 0
		if l < len(keep) {
			k = keep[l]
		}
		if k < 0 {
			return nil, fmt.Errorf("kv: layer %d keeps %d positions", l, k)
		}
		c.kept[l] = Kept(k, positions)
	}
	switch t {
	case F16:
		c.k16, c.v16 = make([][]uint16, layers), make([][]uint16, layers)
		for l := range layers {
			row := kvHeads * headDim * c.kept[l]
			c.k16[l], c.v16[l] = make([]uint16, row), make([]uint16, row)
		}
	case F32:
		c.k32, c.v32 = make([][]float32, layers), make([][]float32, layers)
		for l := range layers {
			row := kvHeads * headDim * c.kept[l]
			c.k32[l], c.v32[l] = make([]float32, row), make([]float32, row)
		}
	case Int8:
		c.block = BlockSize(headDim)
		c.k8, c.v8 = make([][]int8, layers), make([][]int8, layers)
		c.ks, c.vs = make([][]float32, layers), make([][]float32, layers)
		for l := range layers {
			row := kvHeads * headDim * c.kept[l]
			c.k8[l], c.v8[l] = make([]int8, row), make([]int8, row)
			c.ks[l], c.vs[l] = make([]float32, row/c.block), make([]float32, row/c.block)
		}
	default:
		return nil, fmt.Errorf("kv: unknown cache type %q", t)
	}
	return c, nil
}

// Capacity is the number of positions the cache holds.
func (c *Cache) Capacity() int { return c.positions }

// Kept is the number of positions layer holds: Capacity, or fewer for a ring.
func (c *Cache) Kept(layer int) int { return c.kept[layer] }

// Slot is where position p sits in layer (p itself unless the layer is a ring).
func (c *Cache) Slot(layer, p int) int { return p % c.kept[layer] }

// Bytes is the memory the cache holds.
func (c *Cache) Bytes() int64 {
	return LayerBytes(c.layers, c.kvHeads, c.headDim, c.positions, c.typ, c.kept)
}

// Type of the elements.
func (c *Cache) Type() Type { return c.typ }

// Store writes n rows of keys and values (kvHeads*headDim each, head after head) at
// positions pos0...
func (c *Cache) Store(layer, pos0, n int, k, v []float32) {
	d := c.headDim
	for i := range n {
		for h := range c.kvHeads {
			src := (i*c.kvHeads + h) * d
			dst := c.HeadOffset(layer, h) + c.Slot(layer, pos0+i)*d
			switch c.typ {
			case F32:
				copy(c.k32[layer][dst:dst+d], k[src:src+d])
				copy(c.v32[layer][dst:dst+d], v[src:src+d])
				continue
			case Int8:
				for b := 0; b < d; b += c.block {
					c.ks[layer][(dst+b)/c.block] = quantize8(c.k8[layer][dst+b:dst+b+c.block], k[src+b:src+b+c.block])
					c.vs[layer][(dst+b)/c.block] = quantize8(c.v8[layer][dst+b:dst+b+c.block], v[src+b:src+b+c.block])
				}
				continue
			}
			kd, vd := c.k16[layer][dst:dst+d], c.v16[layer][dst:dst+d]
			for j := range kd {
				kd[j] = quant.FP32ToFP16(k[src+j])
				vd[j] = quant.FP32ToFP16(v[src+j])
			}
		}
	}
}

// HeadOffset is where KV head h's slot 0 starts in a layer's keys or values; the slot of
// position p (see Slot) is headDim values further on per slot.
func (c *Cache) HeadOffset(layer, h int) int { return h * c.kept[layer] * c.headDim }

// Key copies the key of head h at position p of layer into dst (headDim values).
func (c *Cache) Key(layer, p, h int, dst []float32) {
	off := c.HeadOffset(layer, h) + c.Slot(layer, p)*c.headDim
	switch c.typ {
	case F32:
		copy(dst, c.k32[layer][off:off+c.headDim])
		return
	case Int8:
		for i, x := range c.k8[layer][off : off+c.headDim] {
			dst[i] = float32(x) * c.ks[layer][(off+i)/c.block]
		}
		return
	}
	for i, x := range c.k16[layer][off : off+c.headDim] {
		dst[i] = quant.FP16ToFP32(x)
	}
}

// Keys32 and the others return the raw storage of a layer (see Cache for its order), for
// fast loops; the 32-bit ones are nil in a float16 cache and the 16-bit ones in a float32 one.
func (c *Cache) Keys32(layer int) []float32   { return c.k32[layer] }
func (c *Cache) Values32(layer int) []float32 { return c.v32[layer] }
func (c *Cache) Keys16(layer int) []uint16    { return c.k16[layer] }
func (c *Cache) Values16(layer int) []uint16  { return c.v16[layer] }

// Keys8 and the others are an int8 cache's raw storage of a layer: values in the order of
// Cache, scales one per Block values (value i has scale i/Block); nil in other caches.
func (c *Cache) Keys8(layer int) []int8          { return c.k8[layer] }
func (c *Cache) Values8(layer int) []int8        { return c.v8[layer] }
func (c *Cache) KeyScales(layer int) []float32   { return c.ks[layer] }
func (c *Cache) ValueScales(layer int) []float32 { return c.vs[layer] }

// Block is the values per scale of an int8 cache (0 in others).
func (c *Cache) Block() int { return c.block }

// quantize8 stores x as round(x/scale) in q, scale = max|x|/127 (symmetric: attention's
// keys and values are centred on zero), and returns the scale; an all-zero block has scale 0.
func quantize8(q []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	if amax == 0 {
		clear(q)
		return 0
	}
	scale := amax / 127
	inv := 1 / scale
	for i, v := range x {
		q[i] = int8(max(-127, min(127, math.Round(float64(v*inv)))))
	}
	return scale
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
