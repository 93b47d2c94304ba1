package quant

import (
	"encoding/binary"
	"math"
	"sync"
)

// Quantisers for the IQ2 and IQ3 grid types. They are not ggml's importance-weighted
// searches but make valid blocks that approximate the input well:
//
//  1. Per 8 values, the signs are split off. The types that store 7 sign bits (IQ2_XXS,
//     IQ2_XS, IQ3_XXS: the 8th is the parity, ksignsIQ2XS) need an even count of negative
//     values, so when it is odd the value of smallest magnitude keeps the wrong sign.
//  2. Per scale group (32 values, 16 for IQ2_XS/IQ2_S), a handful of trial scales g: each
//     |x|/g is rounded coordinate by coordinate to the grid's levels, and that level vector
//     is mapped to its nearest grid entry (a table made once per grid); the least-squares
//     scale of the chosen entries is kept for the trial that fits best.
//  3. The block's fp16 d comes from the largest group scale, each group's 4-bit scale is
//     rounded against d, and the grid entries are chosen again for the scale as stored,
//     this time the best on the values themselves of the iqNeighbours entries nearest the
//     rounded vector.

// iqGrid is one grid as the quantiser sees it: each entry's coordinate values, and for
// every vector of level indices (base len(levels), coordinate 0 lowest) its nearest entry.
type iqGrid struct {
	dim     int
	levels  []float32 // the coordinate values, ascending
	mids    []float32 // midpoints between consecutive levels
	invStep float32   // levels-1 over the span of the levels: the first guess of level
	entries []float32 // entry i's coordinates at [dim*i, dim*i+dim)
	nearest []uint16  // per key its iqNeighbours nearest entries, nearest first
}

// iqNeighbours is how many grid entries near a rounded vector the final choice weighs on
// the values themselves (the trials take the nearest only).
const iqNeighbours = 6

func newIQGrid(hex string, dim int, levels []float32) *iqGrid {
	n := len(hex) / 4
	bitsPer := uint(2)
	if dim == 4 {
		bitsPer = 4
	}
	g := &iqGrid{dim: dim, levels: levels, entries: make([]float32, n*dim)}
	for i := 1; i < len(levels); i++ {
		g.mids = append(g.mids, (levels[i-1]+levels[i])/2)
	}
	g.invStep = float32(len(levels)-1) / (levels[len(levels)-1] - levels[0])
	for i := range n {
		e := gridEntry(hex, i)
		for j := range dim {
			k := int(e>>(bitsPer*uint(j))) & (1<<bitsPer - 1) & 7
			g.entries[dim*i+j] = levels[min(k, len(levels)-1)] // IQ2's unused code 3 reads as 2

		}
	}
	nl := len(levels)
	keys := 1
	for range dim {
		keys *= nl
	}
	g.nearest = make([]uint16, keys*iqNeighbours)
	v := make([]float32, dim)
	var best [iqNeighbours]int
	var bestD [iqNeighbours]float32
	for k := range keys {
		for j, r := 0, k; j < dim; j, r = j+1, r/nl {
			v[j] = levels[r%nl]
		}
		for m := range bestD {
			best[m], bestD[m] = 0, float32(math.MaxFloat32)
		}
		for i := range n {
			var d float32
			for j, c := range g.entries[dim*i : dim*i+dim] {
				d += (c - v[j]) * (c - v[j])
			}
			// Insert into the sorted shortlist.
			for m := range iqNeighbours {
				if d < bestD[m] {
					copy(best[m+1:], best[m:iqNeighbours-1])
					copy(bestD[m+1:], bestD[m:iqNeighbours-1])
					best[m], bestD[m] = i, d
					break
				}
			}
		}
		for m := range iqNeighbours {
			g.nearest[k*iqNeighbours+m] = uint16(best[m])
		}
	}
	return g
}

// level is the index of the level nearest v: a guess as if the levels were evenly spaced
// (right or one off for these grids), then one step towards the right midpoint. NaN gives
// some level in range.
func (g *iqGrid) level(v float32) int {
	f := (v-g.levels[0])*g.invStep + 0.5
	k := 0
	if f > 0 { // also false for NaN
		k = min(int(min(f, 64)), len(g.mids))
	}
	if k < len(g.mids) && v >= g.mids[k] {
		k++
	} else if k > 0 && v < g.mids[k-1] {
		k--
	}
	return k
}

// key is the index of the level vector nearest a*inv.
func (g *iqGrid) key(a []float32, inv float32) int {
	key, mul := 0, 1
	for _, v := range a[:g.dim] {
		key += g.level(v*inv) * mul
		mul *= len(g.levels)
	}
	return key
}

// pick returns the grid entry for a (dim values, >= 0) at scale inv = 1/g: the entry
// nearest the rounded vector, and the sums of a*q and q*q over its coordinates q.
func (g *iqGrid) pick(a []float32, inv float32) (idx int, sumQX, sumQ2 float32) {
	idx = int(g.nearest[g.key(a, inv)*iqNeighbours])
	for j, q := range g.entries[g.dim*idx : g.dim*idx+g.dim] {
		sumQX += a[j] * q
		sumQ2 += q * q
	}
	return idx, sumQX, sumQ2
}

// pickBest is pick over the rounded vector's neighbours, judged by the squared error at
// scale gq against a itself.
func (g *iqGrid) pickBest(a []float32, gq float32) int {
	inv := float32(0)
	if gq > 0 {
		inv = 1 / gq
	}
	near := g.nearest[g.key(a, inv)*iqNeighbours:][:iqNeighbours]
	best, bestE := int(near[0]), float32(math.MaxFloat32)
	for _, i := range near {
		var e float32
		for j, q := range g.entries[g.dim*int(i) : g.dim*int(i)+g.dim] {
			d := a[j] - gq*q
			e += d * d
		}
		if e < bestE {
			best, bestE = int(i), e
		}
	}
	return best
}

// iqGrids holds the five grids, built on first use (a few milliseconds) and only read after.
type iqGrids struct{ iq2xxs, iq2xs, iq2s, iq3xxs, iq3s *iqGrid }

var loadIQGrids = sync.OnceValue(func() *iqGrids {
	iq2 := []float32{8, 25, 43}
	return &iqGrids{
		iq2xxs: newIQGrid(gridHexIQ2XXS, 8, iq2),
		iq2xs:  newIQGrid(gridHexIQ2XS, 8, iq2),
		iq2s:   newIQGrid(gridHexIQ2S, 8, iq2),
		iq3xxs: newIQGrid(gridHexIQ3XXS, 4, []float32{4, 12, 20, 28, 36, 44, 52, 62}),
		iq3s:   newIQGrid(gridHexIQ3S, 4, []float32{1, 3, 5, 7, 9, 11, 13, 15}),
	}
})

// iqLayout is what differs between the five types: the grid, the scale group, the sign
// rule and how the group scale g relates to d and the stored 4-bit s (g = d*(off+s)*mul).
type iqLayout struct {
	grid      *iqGrid
	group     int     // values per 4-bit scale
	freeSigns bool    // 8 stored sign bits per 8 values (else 7 and a parity bit)
	off, mul  float32 // g = d * (off + s) * mul
}

// iqBlock is one block's choices before packing.
type iqBlock struct {
	d      float32
	idx    [64]int   // grid entry per dim values
	signs  [32]uint8 // bit j: value 8i+j is negative
	scales [16]int   // 4-bit scale per group
}

// quantBlockIQ fills blk from the 256 values x.
func quantBlockIQ(lay iqLayout, x []float32, blk *iqBlock) {
	g := lay.grid
	var a [QK_K]float32
	for i := range QK_K / 8 {
		var s uint8
		minJ := 0
		for j := range 8 {
			v := x[8*i+j]
			a[8*i+j] = absF32(v)
			if v < 0 {
				s |= 1 << j
			}
			if a[8*i+j] < a[8*i+minJ] {
				minJ = j
			}
		}
		if !lay.freeSigns && parity8(s) {
			s ^= 1 << minJ
		}
		blk.signs[i] = s
	}
	top := g.levels[len(g.levels)-1]
	// The trial scales, as fractions of the one that maps the group's largest value onto
	// the grid's largest level.
	trials := [...]float32{0.7, 0.78, 0.86, 0.93, 1, 1.08, 1.18}
	ngroups := QK_K / lay.group
	var gs [16]float32
	var gmax float32
	for ib := range ngroups {
		ga := a[ib*lay.group : (ib+1)*lay.group]
		var amax float32
		for _, v := range ga {
			amax = max(amax, v)
		}
		if !(amax > 0) || math.IsInf(float64(amax), 0) {
			continue // NaN, inf or zeros: scale 0 unless another group sets d
		}
		var bestFit, bestG float32
		for _, t := range trials {
			inv := top * t / amax
			var sqx, sq2 float32
			for k := 0; k < lay.group; k += g.dim {
				_, qx, q2 := g.pick(ga[k:], inv)
				sqx += qx
				sq2 += q2
			}
			if fit := sqx * sqx / sq2; sq2 > 0 && fit > bestFit {
				bestFit, bestG = fit, sqx/sq2
			}
		}
		gs[ib] = bestG
		gmax = max(gmax, bestG)
	}
	blk.d = 0
	if !(gmax > 0) {
		clear(blk.idx[:])
		clear(blk.scales[:])
		return
	}
	d := gmax / ((lay.off + 15) * lay.mul)
	blk.d = FP16ToFP32(FP32ToFP16(d)) // the d the reader sees
	if blk.d == 0 {
		blk.d = d // below fp16's range the stored d is 0 anyway
	}
	for ib := range ngroups {
		s := clampInt(nearestInt(gs[ib]/(blk.d*lay.mul)-lay.off), 0, 15)
		blk.scales[ib] = s
		gq := blk.d * (lay.off + float32(s)) * lay.mul
		for k := 0; k < lay.group; k += g.dim {
			v := ib*lay.group + k
			blk.idx[v/g.dim] = g.pickBest(a[v:], gq)
		}
	}
}

func parity8(s uint8) bool {
	s ^= s >> 4
	s ^= s >> 2
	s ^= s >> 1
	return s&1 == 1
}

func quantRowIQ(lay iqLayout, bytes int, pack func(blk *iqBlock, b []byte), src []float32, dst []byte) {
	var blk iqBlock
	for i := range len(src) / QK_K {
		quantBlockIQ(lay, src[i*QK_K:(i+1)*QK_K], &blk)
		b := dst[i*bytes : (i+1)*bytes]
		clear(b)
		putHalf(b, 0, blk.d)
		pack(&blk, b)
	}
}

func quantRowIQ2_XXS(src []float32, dst []byte) {
	lay := iqLayout{grid: loadIQGrids().iq2xxs, group: 32, off: 0.5, mul: 0.25}
	quantRowIQ(lay, 66, func(blk *iqBlock, b []byte) {
		for ib := range 8 {
			aux := uint32(blk.scales[ib]) << 28
			for l := range 4 {
				b[2+8*ib+l] = uint8(blk.idx[4*ib+l])
				aux |= uint32(blk.signs[4*ib+l]&127) << (7 * l)
			}
			binary.LittleEndian.PutUint32(b[2+8*ib+4:], aux)
		}
	}, src, dst)
}

func quantRowIQ2_XS(src []float32, dst []byte) {
	lay := iqLayout{grid: loadIQGrids().iq2xs, group: 16, off: 0.5, mul: 0.25}
	quantRowIQ(lay, 74, func(blk *iqBlock, b []byte) {
		for ib := range 8 {
			for l := range 4 {
				q := uint16(blk.idx[4*ib+l]) | uint16(blk.signs[4*ib+l]&127)<<9
				binary.LittleEndian.PutUint16(b[2+8*ib+2*l:], q)
			}
			b[66+ib] = uint8(blk.scales[2*ib] | blk.scales[2*ib+1]<<4)
		}
	}, src, dst)
}

func quantRowIQ2_S(src []float32, dst []byte) {
	lay := iqLayout{grid: loadIQGrids().iq2s, group: 16, off: 0.5, mul: 0.25, freeSigns: true}
	quantRowIQ(lay, 82, func(blk *iqBlock, b []byte) {
		for ib := range 8 {
			for l := range 4 {
				idx := blk.idx[4*ib+l]
				b[2+4*ib+l] = uint8(idx)
				b[34+4*ib+l] = blk.signs[4*ib+l]
				b[66+ib] |= uint8(idx>>8) << (2 * l)
			}
			b[74+ib] = uint8(blk.scales[2*ib] | blk.scales[2*ib+1]<<4)
		}
	}, src, dst)
}

func quantRowIQ3_XXS(src []float32, dst []byte) {
	lay := iqLayout{grid: loadIQGrids().iq3xxs, group: 32, off: 0.5, mul: 0.5}
	quantRowIQ(lay, 98, func(blk *iqBlock, b []byte) {
		for ib := range 8 {
			aux := uint32(blk.scales[ib]) << 28
			for l := range 4 {
				b[2+8*ib+2*l] = uint8(blk.idx[8*ib+2*l])
				b[2+8*ib+2*l+1] = uint8(blk.idx[8*ib+2*l+1])
				aux |= uint32(blk.signs[4*ib+l]&127) << (7 * l)
			}
			binary.LittleEndian.PutUint32(b[66+4*ib:], aux)
		}
	}, src, dst)
}

func quantRowIQ3_S(src []float32, dst []byte) {
	lay := iqLayout{grid: loadIQGrids().iq3s, group: 32, off: 0.5, mul: 2, freeSigns: true}
	quantRowIQ(lay, 110, func(blk *iqBlock, b []byte) {
		for ib := range 8 {
			for l := range 4 {
				i0, i1 := blk.idx[8*ib+2*l], blk.idx[8*ib+2*l+1]
				b[2+8*ib+2*l] = uint8(i0)
				b[2+8*ib+2*l+1] = uint8(i1)
				b[66+ib] |= uint8(i0>>8)<<(2*l) | uint8(i1>>8)<<(2*l+1)
				b[74+4*ib+l] = blk.signs[4*ib+l]
			}
			b[106+ib/2] |= uint8(blk.scales[ib]) << (4 * (ib % 2))
		}
	}, src, dst)
}
