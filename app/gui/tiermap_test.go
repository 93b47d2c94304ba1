package gui

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"strata/engine"
	"strata/engine/synth"
)

// snapshotFor builds a layers x experts snapshot with the given tiers and hits.
func snapshotFor(tiers [][]engine.Tier, hits [][]uint64) engine.TierSnapshot {
	return engine.TierSnapshot{Layers: len(tiers), Experts: len(tiers[0]), Tier: tiers, Hits: hits}
}

func TestTierMapDrawsSnapshot(t *testing.T) {
	test.NewTempApp(t)
	tm := NewTierMap()
	w := test.NewTempWindow(t, tm)
	w.SetPadded(false)
	w.Resize(fyne.NewSize(400, 200))

	tiers := [][]engine.Tier{
		{engine.TierVRAM, engine.TierHelper, engine.TierPinned, engine.TierCold},
		{engine.TierCPU, engine.TierVRAM, engine.TierCold, engine.TierPinned},
	}
	hits := [][]uint64{{1000, 10, 0, 3}, {50, 0, 999, 1}}
	tm.SetSnapshot(snapshotFor(tiers, hits))

	img := w.Canvas().Capture()
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(tm)
	size := tm.Size()
	g := geometry(int(size.Width), int(size.Height), 2, 4)
	if g.cellW == 0 {
		t.Fatalf("tier map has no room: size %v", size)
	}
	for l := range tiers {
		for e := range tiers[l] {
			r := g.cell(l, e)
			x := int(pos.X) + (r.Min.X+r.Max.X)/2
			y := int(pos.Y) + (r.Min.Y+r.Max.Y)/2
			want := cellColor(tiers[l][e], hits[l][e], 1000, false)
			if got := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA); !near(got, want) {
				t.Errorf("cell layer %d expert %d (%s, %d hits) at (%d,%d): got %v, want %v", l, e, tiers[l][e], hits[l][e], x, y, got, want)
			}
		}
	}
	// The most-hit expert is drawn at full brightness, an unhit one dimmed.
	if got := cellColor(engine.TierVRAM, 1000, 1000, false); got != tierColor(engine.TierVRAM) {
		t.Errorf("most-hit VRAM cell %v, want the full tier colour %v", got, tierColor(engine.TierVRAM))
	}

	// Experts hit since the previous snapshot light up.
	hits2 := [][]uint64{{1000, 11, 0, 3}, {50, 0, 999, 1}}
	tm.SetSnapshot(snapshotFor(tiers, hits2))
	img = w.Canvas().Capture()
	r := g.cell(0, 1)
	got := color.NRGBAModel.Convert(img.At(int(pos.X)+(r.Min.X+r.Max.X)/2, int(pos.Y)+(r.Min.Y+r.Max.Y)/2)).(color.NRGBA)
	if want := cellColor(engine.TierHelper, 11, 1000, true); !near(got, want) {
		t.Errorf("cell hit since the last snapshot: got %v, want lit %v", got, want)
	}
	r = g.cell(0, 0)
	got = color.NRGBAModel.Convert(img.At(int(pos.X)+(r.Min.X+r.Max.X)/2, int(pos.Y)+(r.Min.Y+r.Max.Y)/2)).(color.NRGBA)
	if want := cellColor(engine.TierVRAM, 1000, 1000, false); !near(got, want) {
		t.Errorf("cell not hit since: got %v, want unlit %v", got, want)
	}
}

func near(a, b color.NRGBA) bool {
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(a.R, b.R) <= 2 && d(a.G, b.G) <= 2 && d(a.B, b.B) <= 2
}

func TestDrawGridRejectsMalformedSnapshots(t *testing.T) {
	bg := gridBackground()
	for name, s := range map[string]engine.TierSnapshot{
		"empty":        {},
		"short rows":   {Layers: 2, Experts: 2, Tier: [][]engine.Tier{{0, 0}}, Hits: [][]uint64{{0, 0}, {0, 0}}},
		"ragged hits":  {Layers: 1, Experts: 2, Tier: [][]engine.Tier{{0, 0}}, Hits: [][]uint64{{0}}},
		"negative":     {Layers: -1, Experts: 3},
		"more than px": wideSnapshot(48, 512, nil), // 24,576 experts in 5,000 pixels
	} {
		img := drawGrid(100, 50, s, nil)
		if img.Bounds() != image.Rect(0, 0, 100, 50) {
			t.Errorf("%s: bounds %v", name, img.Bounds())
		}
		if got := img.NRGBAAt(50, 25); got != bg {
			t.Errorf("%s: drew %v, want only the background", name, got)
		}
	}
}

func TestDrawBarProportions(t *testing.T) {
	uses := []engine.MemoryUse{{Device: "ram", Kind: "weights", Bytes: 1}, {Device: "ram", Kind: "kv cache", Bytes: 3}}
	img := drawBar(100, 4, uses, 4).(*image.NRGBA)
	if got := img.NRGBAAt(10, 1); got != segmentColor(uses[0]) {
		t.Errorf("first quarter %v, want weights colour", got)
	}
	if got := img.NRGBAAt(60, 1); got != segmentColor(uses[1]) {
		t.Errorf("last three quarters %v, want kv cache colour", got)
	}
}

func TestHitRates(t *testing.T) {
	s := engine.TierSnapshot{
		BytesPerTier: map[engine.Tier]int64{engine.TierVRAM: 3 << 30, engine.TierCold: 1 << 30},
		HitsPerTier:  map[engine.Tier]uint64{engine.TierVRAM: 75, engine.TierCold: 25},
	}
	want := "VRAM: 75% of hits · 3.0 GiB\nSSD: 25% of hits · 1.0 GiB"
	if got := hitRates(s); got != want {
		t.Errorf("hitRates:\n got %q\nwant %q", got, want)
	}
	if got := hitRates(engine.TierSnapshot{}); got != "No routing yet." {
		t.Errorf("empty snapshot: %q", got)
	}
}

// pausingEngine is the real engine with a pause in every answer: after pauseAt streamed
// tokens it reports on paused and waits for resume, so a test can look at the screen while
// the answer is being written.
type pausingEngine struct {
	engineAPI
	pauseAt int
	paused  chan struct{}
	resume  chan struct{}
}

func (e pausingEngine) Open(ctx context.Context, path string, cfg engine.Config, onProgress func(engine.Progress)) (Model, error) {
	m, err := e.engineAPI.Open(ctx, path, cfg, onProgress)
	if err != nil {
		return nil, err
	}
	return pausingModel{Model: m, e: e}, nil
}

type pausingModel struct {
	Model
	e pausingEngine
}

func (m pausingModel) NewSession(opts engine.SessionOptions) Session {
	return pausingSession{s: m.Model.NewSession(opts), e: m.e}
}

type pausingSession struct {
	s Session
	e pausingEngine
}

func (s pausingSession) Chat(ctx context.Context, msgs []engine.Message, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	n := 0
	return s.s.Chat(ctx, msgs, sp, func(t engine.Token) {
		onToken(t)
		if n++; n == s.e.pauseAt {
			s.e.paused <- struct{}{}
			<-s.e.resume
		}
	})
}

// TestTierMapDecodeRateFollowsEngine: on a small synthetic model, the tier map's decode rate is
// the engine's while an answer is written, and the answer's own once it is done.
func TestTierMapDecodeRateFollowsEngine(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "tiny.gguf")
	if err := synth.Write(context.Background(), model, spec, nil); err != nil {
		t.Fatal(err)
	}
	eng := pausingEngine{pauseAt: 8, paused: make(chan struct{}), resume: make(chan struct{})}
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"), Engine: eng, Advise: testAdvice})
	loadFake(t, a.ctl, model)
	g.ui.do(func() { a.Show(ScreenTiers) }) // before SetAdvanced: a new chat view sets its preset
	sp, _ := a.ctl.Sampling()
	sp.MaxTokens = 24
	if err := a.ctl.SetAdvanced(fieldsOf(sp)); err != nil {
		t.Fatal(err)
	}
	if err := a.ctl.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	finished := make(chan struct{})
	go func() { a.ctl.Wait(); close(finished) }()
	select {
	case <-eng.paused:
	case <-finished:
		t.Fatalf("the answer ended before %d tokens: %+v", eng.pauseAt, a.ctl.Chat())
	}
	var during string
	g.ui.do(func() {
		a.tiers.refreshNow()
		during = a.tiers.speed.Text
	})
	close(eng.resume)
	a.ctl.Wait()
	if strings.HasPrefix(during, "Decode: 0.0 ") {
		t.Errorf("while the answer is written the tier map says %q", during)
	}
	msgs := a.ctl.Chat().Chat.Messages
	want := fmt.Sprintf("Decode: %.1f tokens/s", msgs[len(msgs)-1].TokensPerSec)
	var after string
	g.ui.do(func() {
		a.tiers.refreshNow()
		after = a.tiers.speed.Text
	})
	if !strings.HasPrefix(after, want) {
		t.Errorf("after the answer the tier map says %q, want %q", after, want)
	}
}

// colourDistance is the Euclidean distance of two colours in RGB.
func colourDistance(a, b color.NRGBA) float64 {
	d := func(x, y uint8) float64 { return float64(x) - float64(y) }
	return math.Sqrt(d(a.R, b.R)*d(a.R, b.R) + d(a.G, b.G)*d(a.G, b.G) + d(a.B, b.B)*d(a.B, b.B))
}

// TestMemoryBarSegmentsHaveTheirOwnLegendColour draws each device's bar for every kind of
// memory use: each segment is named under the bar next to a swatch of its colour, no two
// segments look alike, and a segment looks like a tier only when it holds that tier's
// experts.
func TestMemoryBarSegmentsHaveTheirOwnLegendColour(t *testing.T) {
	test.NewTempApp(t)
	const distinct = 80 // RGB distance below which two colours read as one on a dark bar
	tiers := []engine.Tier{engine.TierVRAM, engine.TierHelper, engine.TierPinned, engine.TierCold, engine.TierCPU}
	holds := map[string]engine.Tier{"vram expert cache": engine.TierVRAM, "ram pinned": engine.TierPinned,
		"vram experts": engine.TierVRAM, "ram experts": engine.TierCPU}
	for name, mem := range map[string][]engine.MemoryUse{
		"tiered": {{Device: "vram", Kind: "weights", Bytes: 100}, {Device: "vram", Kind: "expert cache", Bytes: 300},
			{Device: "vram", Kind: "kv cache", Bytes: 80}, {Device: "vram", Kind: "recurrent state", Bytes: 60},
			{Device: "vram", Kind: "other", Bytes: 60}, {Device: "ram", Kind: "pinned", Bytes: 200}},
		"cpu": {{Device: "ram", Kind: "weights", Bytes: 100}, {Device: "ram", Kind: "experts", Bytes: 300},
			{Device: "ram", Kind: "kv cache", Bytes: 100}},
		"gpu": {{Device: "vram", Kind: "weights", Bytes: 100}, {Device: "vram", Kind: "experts", Bytes: 300},
			{Device: "vram", Kind: "kv cache", Bytes: 100}},
	} {
		for _, dev := range memoryDevices(mem) {
			var uses []engine.MemoryUse
			var total int64
			for _, u := range mem {
				if u.Device == dev {
					uses = append(uses, u)
					total += u.Bytes
				}
			}
			obj := memoryBar(dev, mem)
			w := test.NewTempWindow(t, obj)
			w.SetPadded(false)
			w.Resize(fyne.NewSize(340, obj.MinSize().Height))
			img := w.Canvas().Capture()
			var bar *canvas.Raster
			legend := map[string]color.NRGBA{} // legend text -> swatch colour
			objects(obj, func(o fyne.CanvasObject) {
				if r, ok := o.(*canvas.Raster); ok {
					bar = r
				}
				c, ok := o.(*fyne.Container)
				if !ok || len(c.Objects) != 2 {
					return
				}
				label, ok := c.Objects[1].(*widget.Label)
				if !ok {
					return
				}
				objects(c.Objects[0], func(o fyne.CanvasObject) {
					if r, ok := o.(*canvas.Rectangle); ok {
						legend[label.Text] = color.NRGBAModel.Convert(r.FillColor).(color.NRGBA)
					}
				})
			})
			if bar == nil {
				t.Fatalf("%s %s: no bar", name, dev)
			}
			pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(bar)
			var seen []color.NRGBA
			var done int64
			for _, u := range uses {
				mid := float64(done) + float64(u.Bytes)/2
				done += u.Bytes
				x := int(pos.X) + int(float64(bar.Size().Width)*mid/float64(total))
				y := int(pos.Y + bar.Size().Height/2)
				got := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				entry := u.Kind + " " + humanBytes(u.Bytes)
				sw, ok := legend[entry]
				if !ok {
					t.Errorf("%s %s: %q is drawn in %v but has no legend entry with a swatch (legend %v)", name, dev, u.Kind, got, legend)
				} else if !near(got, sw) {
					t.Errorf("%s %s: %q is drawn in %v, its legend swatch is %v", name, dev, u.Kind, got, sw)
				}
				for _, s := range seen {
					if colourDistance(got, s) < distinct {
						t.Errorf("%s %s: %q (%v) looks like another segment's %v", name, dev, u.Kind, got, s)
					}
				}
				seen = append(seen, got)
				if tier, ok := holds[dev+" "+u.Kind]; ok {
					if !near(got, tierColor(tier)) {
						t.Errorf("%s %s: %q holds the %s tier's experts but is drawn in %v, not the tier's %v", name, dev, u.Kind, tierTitle(tier), got, tierColor(tier))
					}
					continue
				}
				for _, tier := range tiers {
					if d := colourDistance(got, tierColor(tier)); d < distinct {
						t.Errorf("%s %s: %q is drawn in %v, which reads as the %s tier's %v (distance %.0f)", name, dev, u.Kind, got, tierTitle(tier), tierColor(tier), d)
					}
				}
			}
		}
	}
}

// TestHelperMemoryBars: a helper GPU's slots get a bar of their own after the main card's,
// painted in the helper tier's colour.
func TestHelperMemoryBars(t *testing.T) {
	mem := []engine.MemoryUse{
		{Device: "ram", Kind: "pinned", Bytes: 4}, {Device: "vram", Kind: "expert cache", Bytes: 2},
		{Device: "helper gpu 1", Kind: "helper experts", Bytes: 3},
	}
	if devs := memoryDevices(mem); len(devs) != 3 || devs[0] != "vram" || devs[2] != "helper gpu 1" {
		t.Errorf("bars %v, want vram first and the helper's", devs)
	}
	if got, want := segmentColor(mem[2]), tierColor(engine.TierHelper); got != want {
		t.Errorf("helper experts painted %v, the helper tier is %v", got, want)
	}
}

// wideSnapshot is a layers x experts snapshot with the tiers cycling so that neighbours
// differ and hits that vary; tier (if not nil) gives an expert's tier instead.
func wideSnapshot(layers, experts int, tier func(l, e int) engine.Tier) engine.TierSnapshot {
	tiers := []engine.Tier{engine.TierVRAM, engine.TierHelper, engine.TierPinned, engine.TierCold, engine.TierCPU}
	s := engine.TierSnapshot{Layers: layers, Experts: experts, Tier: make([][]engine.Tier, layers), Hits: make([][]uint64, layers)}
	for l := range layers {
		s.Tier[l], s.Hits[l] = make([]engine.Tier, experts), make([]uint64, experts)
		for e := range experts {
			s.Tier[l][e] = tiers[(l+e)%len(tiers)]
			if tier != nil {
				s.Tier[l][e] = tier(l, e)
			}
			s.Hits[l][e] = uint64((l*experts + e) % 97)
		}
	}
	return s
}

// TestTierMapDrawsEveryExpertOf512: the tier map of a qwen3next-sized model (48 layers x 512
// experts) in the window sizes a user has, down to the map's minimum size, draws every
// expert exactly once, inside the map, in its tier's colour shaded by its hits, and
// nothing else but the background; the map's minimum size does not grow with the experts.
func TestTierMapDrawsEveryExpertOf512(t *testing.T) {
	test.NewTempApp(t)
	const layers, experts = 48, 512
	snap := wideSnapshot(layers, experts, nil)
	var maxHits uint64
	for _, row := range snap.Hits {
		for _, n := range row {
			maxHits = max(maxHits, n)
		}
	}
	tm := NewTierMap()
	if ms := tm.MinSize(); ms.Width > 256 || ms.Height > 160 {
		t.Errorf("minimum size %v grew past 256 x 160", ms)
	}
	w := test.NewTempWindow(t, tm)
	w.SetPadded(false)
	tm.SetSnapshot(snap)
	bg := gridBackground()
	for _, size := range []fyne.Size{tm.MinSize(), fyne.NewSize(300, 200), fyne.NewSize(520, 360), fyne.NewSize(1400, 700)} {
		w.Resize(size)
		img := w.Canvas().Capture()
		pos := tm.Position() // the window's only content, unpadded
		got := tm.Size()
		if img.Bounds().Dx() < int(pos.X+got.Width) || img.Bounds().Dy() < int(pos.Y+got.Height) {
			t.Fatalf("%v: a %v capture does not hold the %v map at %v", size, img.Bounds(), got, pos)
		}
		g := geometry(int(got.Width), int(got.Height), layers, experts)
		if g.cellW == 0 || g.cellH == 0 {
			t.Fatalf("%v: no room for %d x %d experts in a %v map", size, layers, experts, got)
		}
		// Every expert once: the cells are inside the map and never overlap.
		bounds := image.Rect(0, 0, int(got.Width), int(got.Height))
		owner := make([]int32, bounds.Dx()*bounds.Dy())
		for l := range layers {
			for e := range experts {
				r := g.cell(l, e)
				if r.Empty() || !r.In(bounds) {
					t.Fatalf("%v: layer %d expert %d: cell %v empty or outside the map %v", size, l, e, r, bounds)
				}
				for y := r.Min.Y; y < r.Max.Y; y++ {
					for x := r.Min.X; x < r.Max.X; x++ {
						if o := owner[y*bounds.Dx()+x]; o != 0 {
							t.Fatalf("%v: layer %d expert %d overlaps expert %d at (%d,%d)", size, l, e, o-1, x, y)
						}
						owner[y*bounds.Dx()+x] = int32(l*experts+e) + 1
					}
				}
			}
		}
		// What the screen shows: each pixel of a cell in its expert's colour, the rest
		// the background.
		bad := 0
		for y := range bounds.Dy() {
			for x := range bounds.Dx() {
				want := bg
				if o := owner[y*bounds.Dx()+x]; o != 0 {
					l, e := int(o-1)/experts, int(o-1)%experts
					want = cellColor(snap.Tier[l][e], snap.Hits[l][e], maxHits, false)
				}
				if px := color.NRGBAModel.Convert(img.At(int(pos.X)+x, int(pos.Y)+y)).(color.NRGBA); !near(px, want) {
					if bad++; bad <= 5 {
						t.Errorf("%v: pixel (%d,%d) is %v, want %v", size, x, y, px, want)
					}
				}
			}
		}
		if bad > 5 {
			t.Errorf("%v: %d pixels wrong in all", size, bad)
		}
		if size == tm.MinSize() && g.bands < 2 {
			t.Errorf("%v: %d experts in one row of %d pixels", size, experts, bounds.Dx())
		}
		if size.Width >= 1400 && (g.bands != 1 || g.cellW < 2) {
			t.Errorf("%v: %d bands of %d-pixel cells; a wide map keeps a layer a row", size, g.bands, g.cellW)
		}
	}
}

// TestGeometryKeepsCellsReadable: one row a layer while the experts fit two pixels wide;
// wrapped only when they do not, into cells no smaller than one row would give.
func TestGeometryKeepsCellsReadable(t *testing.T) {
	for _, tc := range []struct {
		w, h, layers, experts int
		bands                 int // 0: more than one
	}{
		{400, 200, 2, 4, 1},
		{600, 400, 48, 128, 1},
		{600, 400, 94, 128, 1},
		{600, 400, 48, 512, 0},
		{256, 160, 48, 512, 0},
		{256, 160, 40, 256, 0}, // one pixel wide, wrapped into 2 x 2 cells
	} {
		g := geometry(tc.w, tc.h, tc.layers, tc.experts)
		one := gridGeometry{cellW: tc.w / tc.experts, cellH: tc.h / tc.layers}
		switch {
		case g.cellW == 0 || g.cellH == 0:
			t.Errorf("%+v: nothing drawn", tc)
		case tc.bands == 1 && g.bands != 1:
			t.Errorf("%+v: %d bands, want one row a layer", tc, g.bands)
		case tc.bands == 0 && g.bands < 2:
			t.Errorf("%+v: one row a layer of %d-pixel cells, want it wrapped", tc, g.cellW)
		case min(g.cellW, g.cellH) < min(one.cellW, one.cellH):
			t.Errorf("%+v: cells %d x %d, smaller than one row a layer's %d x %d", tc, g.cellW, g.cellH, one.cellW, one.cellH)
		case g.cols*g.bands < tc.experts || g.cols*g.cellW > tc.w || tc.layers*(g.bands*g.cellH+g.layerGap)-g.layerGap > tc.h:
			t.Errorf("%+v: %d bands of %d columns of %d x %d cells do not hold the experts in the map", tc, g.bands, g.cols, g.cellW, g.cellH)
		}
	}
}
