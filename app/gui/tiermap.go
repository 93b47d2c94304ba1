package gui

import (
	"image"
	"image/color"
	"math"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/widget"

	"strata/engine"
)

// tierColor is a tier's colour at full brightness.
func tierColor(t engine.Tier) color.NRGBA {
	switch t {
	case engine.TierVRAM:
		return color.NRGBA{R: 46, G: 190, B: 90, A: 255} // green
	case engine.TierHelper:
		return color.NRGBA{R: 20, G: 170, B: 200, A: 255} // teal
	case engine.TierPinned:
		return color.NRGBA{R: 240, G: 170, B: 40, A: 255} // amber
	case engine.TierCold:
		return color.NRGBA{R: 150, G: 110, B: 210, A: 255} // violet
	case engine.TierCPU:
		return color.NRGBA{R: 220, G: 100, B: 70, A: 255} // brick
	}
	return color.NRGBA{R: 128, G: 128, B: 128, A: 255}
}

// gridBackground is what lies between and around the cells.
func gridBackground() color.NRGBA { return color.NRGBA{R: 24, G: 24, B: 28, A: 255} }

// cellColor shades a tier's colour by how often the expert was routed (log scale against
// the most-routed expert, so rarely-hit experts stay visible) and lights it up when it was
// hit since the previous snapshot.
func cellColor(t engine.Tier, hits, maxHits uint64, lit bool) color.NRGBA {
	base := tierColor(t)
	shade := 0.3
	if maxHits > 0 {
		shade += 0.7 * math.Log1p(float64(hits)) / math.Log1p(float64(maxHits))
	}
	scale := func(v uint8) uint8 { return uint8(math.Round(float64(v) * shade)) }
	c := color.NRGBA{R: scale(base.R), G: scale(base.G), B: scale(base.B), A: 255}
	if lit {
		mix := func(v uint8) uint8 { return uint8((uint16(v) + 255) / 2) }
		c = color.NRGBA{R: mix(c.R), G: mix(c.G), B: mix(c.B), A: 255}
	}
	return c
}

// gridGeometry places layers and experts in a w x h pixel image: whole-pixel cells, a
// one-pixel gap when cells are big enough to show it, centred. Each layer is a band of
// bands rows of cols experts: one row while the experts fit across with cells at least two
// pixels wide, else wrapped so that the cells are as large as the room allows (qwen3next's
// 512 experts a layer in a 256-pixel-wide map). Bands are one pixel apart when the height
// has room for it.
type gridGeometry struct {
	cellW, cellH, gap, offX, offY int
	bands, cols, layerGap         int
}

func geometry(w, h, layers, experts int) gridGeometry {
	if layers <= 0 || experts <= 0 || w <= 0 || h <= 0 {
		return gridGeometry{}
	}
	var best gridGeometry
	for bands := 1; bands <= experts; bands++ {
		cols := (experts + bands - 1) / bands
		if bands > 1 && (experts+bands-2)/(bands-1) == cols {
			continue // the same columns as fewer bands: more rows for nothing
		}
		g := gridGeometry{bands: bands, cols: cols, cellW: w / cols, cellH: h / (layers * bands)}
		if bands > 1 {
			if withGap := (h - layers) / (layers * bands); withGap >= 3 || (withGap >= 1 && withGap == g.cellH) {
				g.cellH, g.layerGap = withGap, 1
			}
		}
		if g.cellW == 0 || g.cellH == 0 {
			if cols == 1 {
				break
			}
			continue
		}
		if bands == 1 && g.cellW >= 2 {
			best = g
			break
		}
		if best.cellW == 0 || min(g.cellW, g.cellH) > min(best.cellW, best.cellH) {
			best = g
		}
		if cols == 1 {
			break
		}
	}
	if best.cellW == 0 {
		return gridGeometry{} // more experts than pixels: nothing honest to draw
	}
	if best.cellW >= 4 && best.cellH >= 4 {
		best.gap = 1
	}
	best.offX = (w - best.cellW*best.cols) / 2
	best.offY = (h - layers*(best.bands*best.cellH+best.layerGap) + best.layerGap) / 2
	return best
}

// cell is the pixel rectangle of one expert's cell, without the gap.
func (g gridGeometry) cell(layer, expert int) image.Rectangle {
	x0 := g.offX + expert%g.cols*g.cellW
	y0 := g.offY + layer*(g.bands*g.cellH+g.layerGap) + expert/g.cols*g.cellH
	return image.Rect(x0, y0, x0+g.cellW-g.gap, y0+g.cellH-g.gap)
}

// drawGrid paints the layers x experts grid of a snapshot. prev (may be nil or of another
// shape) is the previous snapshot's hit counts, to light up the experts hit since.
func drawGrid(w, h int, snap engine.TierSnapshot, prev [][]uint64) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	fillRect(img, img.Bounds(), gridBackground())
	if !snapshotOK(snap) {
		return img
	}
	g := geometry(w, h, snap.Layers, snap.Experts)
	if g.cellW == 0 || g.cellH == 0 {
		return img // more experts than pixels, even wrapped: nothing honest to draw
	}
	var maxHits uint64
	for _, row := range snap.Hits {
		for _, n := range row {
			maxHits = max(maxHits, n)
		}
	}
	samePrev := len(prev) == snap.Layers
	for l := 0; l < snap.Layers; l++ {
		for e := 0; e < snap.Experts; e++ {
			hits := snap.Hits[l][e]
			lit := samePrev && len(prev[l]) == snap.Experts && hits > prev[l][e]
			fillRect(img, g.cell(l, e), cellColor(snap.Tier[l][e], hits, maxHits, lit))
		}
	}
	return img
}

// fillRect paints r in c: one row pixel by pixel, the others copied from it.
func fillRect(img *image.NRGBA, r image.Rectangle, c color.NRGBA) {
	r = r.Intersect(img.Bounds())
	if r.Empty() {
		return
	}
	first := img.Pix[img.PixOffset(r.Min.X, r.Min.Y) : img.PixOffset(r.Max.X-1, r.Min.Y)+4]
	for i := 0; i < len(first); i += 4 {
		first[i], first[i+1], first[i+2], first[i+3] = c.R, c.G, c.B, c.A
	}
	for y := r.Min.Y + 1; y < r.Max.Y; y++ {
		off := img.PixOffset(r.Min.X, y)
		copy(img.Pix[off:off+len(first)], first)
	}
}

// snapshotOK checks that a snapshot's tables have the shape it claims, so a malformed one
// draws nothing instead of panicking.
func snapshotOK(s engine.TierSnapshot) bool {
	if s.Layers <= 0 || s.Experts <= 0 || len(s.Tier) != s.Layers || len(s.Hits) != s.Layers {
		return false
	}
	for l := 0; l < s.Layers; l++ {
		if len(s.Tier[l]) != s.Experts || len(s.Hits[l]) != s.Experts {
			return false
		}
	}
	return true
}

// TierMap is the grid of layers x experts, coloured by tier and shaded by routing counts.
type TierMap struct {
	widget.BaseWidget
	snap   engine.TierSnapshot
	prev   [][]uint64
	raster *canvas.Raster
}

// NewTierMap makes an empty tier map; SetSnapshot fills it.
func NewTierMap() *TierMap {
	t := &TierMap{}
	t.raster = canvas.NewRaster(func(w, h int) image.Image { return drawGrid(w, h, t.snap, t.prev) })
	t.raster.ScaleMode = canvas.ImageScalePixels
	t.ExtendBaseWidget(t)
	return t
}

// SetSnapshot draws a new snapshot; experts hit since the last one light up. Call it on
// the UI goroutine.
func (t *TierMap) SetSnapshot(s engine.TierSnapshot) {
	if snapshotOK(t.snap) {
		t.prev = t.snap.Hits
	} else {
		t.prev = nil
	}
	t.snap = s
	t.raster.Refresh()
}

// MinSize keeps a pixel per cell of a 256-expert model in one row a layer, and of 48
// layers x 512 experts wrapped (qwen3next), and leaves the window narrow enough for half a
// small screen.
func (t *TierMap) MinSize() fyne.Size { return fyne.NewSize(256, 160) }

// CreateRenderer implements fyne.Widget.
func (t *TierMap) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(t.raster)
}
