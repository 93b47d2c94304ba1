package gui

import (
	"fmt"
	"image"
	"image/color"
	"sort"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"strata/engine"
)

// tiersEvery is the tier map's refresh period: a few times a second is lively enough and
// costs the engine one short lock per refresh.
const tiersEvery = 250 * time.Millisecond

// tiersView is the tier map tab: the grid, a legend, memory bars and per-tier hit rates.
type tiersView struct {
	a      *App
	root   fyne.CanvasObject
	grid   *TierMap
	memory *fyne.Container
	rates  *widget.Label
	speed  *widget.Label
	empty  *widget.Label

	mu   sync.Mutex
	quit chan struct{} // closed to stop the refresher; nil when stopped
}

func (a *App) newTiersView() *tiersView {
	v := &tiersView{a: a, grid: NewTierMap()}
	v.memory = container.NewVBox()
	v.rates = widget.NewLabel("")
	v.speed = widget.NewLabel("")
	v.empty = widget.NewLabel("Load a model to see where its experts live.")
	legend := newFlow(flowLeading) // wraps in a narrow window
	for _, t := range []engine.Tier{engine.TierVRAM, engine.TierHelper, engine.TierPinned, engine.TierCold, engine.TierCPU} {
		legend.Add(container.NewHBox(swatch(tierColor(t)), widget.NewLabel(tierTitle(t))))
	}
	note := secondaryText("Rows are layers, columns are experts (a layer wraps onto several rows when its experts do not fit across). Brighter = routed more often; flashes = routed since the last refresh.")
	side := container.NewVBox(
		widget.NewLabelWithStyle("Memory", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), v.memory,
		widget.NewLabelWithStyle("Where routed experts ran", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), v.rates,
		v.speed)
	top := container.NewVBox(legend, note, v.empty)
	// The side panel keeps its width and scrolls when the window is too short for it.
	v.root = container.NewBorder(top, nil, nil, container.NewStack(fixedWidth(280), container.NewVScroll(side)), v.grid)
	return v
}

// start refreshes the map from the model a few times a second until stop.
func (v *tiersView) start() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.quit != nil {
		return
	}
	quit := make(chan struct{})
	v.quit = quit
	v.refreshNow()
	go func() {
		tick := time.NewTicker(tiersEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				snap, ok := v.a.ctl.Tiers()
				v.a.post(func() { v.show(snap, ok) })
			}
		}
	}()
}

// stop ends the refresher (leaving the tab, or the window closing).
func (v *tiersView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.quit != nil {
		close(v.quit)
		v.quit = nil
	}
}

// refreshNow draws the current snapshot at once.
func (v *tiersView) refreshNow() {
	snap, ok := v.a.ctl.Tiers()
	v.show(snap, ok)
}

// show draws a snapshot (UI goroutine).
func (v *tiersView) show(snap engine.TierSnapshot, ok bool) {
	if !ok || !snapshotOK(snap) {
		v.empty.SetText(emptyTiersText(v.a.ctl.RemoteURL()))
		v.empty.Show()
	} else {
		v.empty.Hide()
	}
	v.grid.SetSnapshot(snap)
	v.memory.RemoveAll()
	for _, dev := range memoryDevices(snap.Memory) {
		v.memory.Add(memoryBar(dev, snap.Memory))
	}
	v.rates.SetText(hitRates(snap))
	v.speed.SetText(speedLine(snap))
}

// speedLine is the decode speed, the swaps, the share of pinned misses the GPU reads over
// PCIe (when it reads any) and anything the tiers could not do as planned.
func speedLine(s engine.TierSnapshot) string {
	line := fmt.Sprintf("Decode: %.1f tokens/s · swaps: %d", s.TokensPerSec, s.Swaps)
	if s.Cache != nil && s.Cache.PCIeReads > 0 {
		line += fmt.Sprintf(" · read over PCIe: %.0f%% of RAM misses", 100*s.Cache.PCIeShare)
	}
	if s.Cache != nil {
		for _, n := range s.Cache.Notes {
			line += "\nNote: " + n
		}
	}
	return line
}

// tierTitle names a tier for people.
func tierTitle(t engine.Tier) string {
	switch t {
	case engine.TierVRAM:
		return "VRAM"
	case engine.TierHelper:
		return "Helper GPU"
	case engine.TierPinned:
		return "Pinned RAM"
	case engine.TierCold:
		return "SSD"
	case engine.TierCPU:
		return "CPU (mapped)"
	}
	return t.String()
}

// hitRates lists, per tier, its share of routed experts and its bytes.
func hitRates(s engine.TierSnapshot) string {
	var total uint64
	for _, n := range s.HitsPerTier {
		total += n
	}
	tiers := make([]engine.Tier, 0, len(s.BytesPerTier))
	seen := map[engine.Tier]bool{}
	for t := range s.BytesPerTier {
		tiers = append(tiers, t)
		seen[t] = true
	}
	for t := range s.HitsPerTier {
		if !seen[t] {
			tiers = append(tiers, t)
		}
	}
	sort.Slice(tiers, func(i, j int) bool { return tiers[i] < tiers[j] })
	var b strings.Builder
	for _, t := range tiers {
		share := 0.0
		if total > 0 {
			share = 100 * float64(s.HitsPerTier[t]) / float64(total)
		}
		fmt.Fprintf(&b, "%s: %.0f%% of hits · %s\n", tierTitle(t), share, humanBytes(s.BytesPerTier[t]))
	}
	if b.Len() == 0 {
		return "No routing yet."
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// memoryDevices lists the devices of the memory table in a stable order (VRAM first).
func memoryDevices(mem []engine.MemoryUse) []string {
	var devs []string
	for _, m := range mem {
		found := false
		for _, d := range devs {
			found = found || d == m.Device
		}
		if !found {
			devs = append(devs, m.Device)
		}
	}
	sort.SliceStable(devs, func(i, j int) bool { return devs[i] == "vram" && devs[j] != "vram" })
	return devs
}

// segmentColor is the colour of one memory bar segment: the tier's colour for a segment
// that holds that tier's experts, else a colour of its own that no tier uses.
func segmentColor(u engine.MemoryUse) color.NRGBA {
	switch u.Kind {
	case "expert cache":
		return tierColor(engine.TierVRAM)
	case "pinned", "not pinned": // the pinned tier's experts, page-locked or not
		return tierColor(engine.TierPinned)
	case "helper experts": // a helper GPU's slots
		return tierColor(engine.TierHelper)
	case "experts": // the whole model's experts, read by the backend that holds them
		if u.Device == "vram" {
			return tierColor(engine.TierVRAM)
		}
		return tierColor(engine.TierCPU)
	case "weights":
		return color.NRGBA{R: 60, G: 100, B: 230, A: 255} // blue
	case "kv cache":
		return color.NRGBA{R: 230, G: 80, B: 170, A: 255} // pink
	case "recurrent state":
		return color.NRGBA{R: 225, G: 225, B: 225, A: 255} // white
	}
	return color.NRGBA{R: 120, G: 120, B: 120, A: 255} // grey
}

// memoryBar is one device's stacked bar under its name and total, with each segment named
// below it next to a swatch of its colour.
func memoryBar(dev string, mem []engine.MemoryUse) fyne.CanvasObject {
	var uses []engine.MemoryUse
	var total int64
	for _, m := range mem {
		if m.Device == dev && m.Bytes > 0 {
			uses = append(uses, m)
			total += m.Bytes
		}
	}
	bar := canvas.NewRaster(func(w, h int) image.Image { return drawBar(w, h, uses, total) })
	bar.SetMinSize(fyne.NewSize(200, 18))
	box := container.NewVBox(widget.NewLabel(strings.ToUpper(dev)+" "+humanBytes(total)), bar)
	for _, u := range uses {
		box.Add(container.NewHBox(swatch(segmentColor(u)), widget.NewLabel(u.Kind+" "+humanBytes(u.Bytes))))
	}
	return box
}

// drawBar paints segments proportional to their bytes.
func drawBar(w, h int, uses []engine.MemoryUse, total int64) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	fillRect(img, img.Bounds(), gridBackground())
	if total <= 0 {
		return img
	}
	x := 0
	var done int64
	for _, u := range uses {
		done += u.Bytes
		end := int(float64(w) * float64(done) / float64(total))
		fillRect(img, image.Rect(x, 0, end, h), segmentColor(u))
		x = max(x, end)
	}
	return img
}

// swatch is a small colour square for legends.
func swatch(c color.Color) fyne.CanvasObject {
	r := canvas.NewRectangle(c)
	r.SetMinSize(fyne.NewSize(14, 14))
	return container.NewCenter(r)
}
