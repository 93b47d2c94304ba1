package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// flowAlign is where a flow's rows put their spare width.
type flowAlign int

const (
	flowLeading flowAlign = iota
	flowCenter
	// flowSpread spreads a row's objects to both ends; a row of one object sits at the
	// leading edge when it is the first object, else at the trailing edge (actions stay
	// on the right when they wrap under the options).
	flowSpread
)

// flowLayout lays objects out in rows that wrap when the width runs out, so a row of
// buttons never sets the window's minimum width beyond its widest button. Unlike Fyne's
// RowWrapLayout its minimum width stays that of the widest object after a wide layout,
// so the window can be made narrow again.
type flowLayout struct {
	align flowAlign
	width float32 // the width of the last layout; 0 before the first
}

func newFlow(align flowAlign, objs ...fyne.CanvasObject) *fyne.Container {
	return container.New(&flowLayout{align: align}, objs...)
}

func visibleObjects(objs []fyne.CanvasObject) []fyne.CanvasObject {
	var vis []fyne.CanvasObject
	for _, o := range objs {
		if o.Visible() {
			vis = append(vis, o)
		}
	}
	return vis
}

// rows splits the objects into rows that fit in width (every row holds at least one).
func (l *flowLayout) rows(objs []fyne.CanvasObject, width float32) [][]fyne.CanvasObject {
	pad := theme.Padding()
	var rows [][]fyne.CanvasObject
	var x float32
	for _, o := range objs {
		w := o.MinSize().Width
		if len(rows) == 0 || (width > 0 && x+pad+w > width) {
			rows = append(rows, []fyne.CanvasObject{o})
			x = w
			continue
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], o)
		x += pad + w
	}
	return rows
}

func rowHeight(row []fyne.CanvasObject) float32 {
	var h float32
	for _, o := range row {
		h = max(h, o.MinSize().Height)
	}
	return h
}

// MinSize is the widest object, as tall as the rows were at the last layout's width.
func (l *flowLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	vis := visibleObjects(objs)
	var s fyne.Size
	for _, o := range vis {
		s.Width = max(s.Width, o.MinSize().Width)
	}
	rows := l.rows(vis, l.width)
	for i, r := range rows {
		if i > 0 {
			s.Height += theme.Padding()
		}
		s.Height += rowHeight(r)
	}
	return s
}

// Layout places the rows; each object keeps its minimum size.
func (l *flowLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	l.width = size.Width
	vis := visibleObjects(objs)
	pad := theme.Padding()
	var y float32
	for i, row := range l.rows(vis, size.Width) {
		var used float32
		for j, o := range row {
			if j > 0 {
				used += pad
			}
			used += o.MinSize().Width
		}
		spare := max(size.Width-used, 0)
		x, gap := float32(0), pad
		switch {
		case l.align == flowCenter:
			x = spare / 2
		case l.align == flowSpread && len(row) > 1:
			gap += spare / float32(len(row)-1)
		case l.align == flowSpread && i > 0:
			x = spare
		}
		h := rowHeight(row)
		for _, o := range row {
			m := o.MinSize()
			o.Resize(fyne.NewSize(m.Width, h))
			o.Move(fyne.NewPos(x, y))
			x += m.Width + gap
		}
		y += h + pad
	}
}

// widthCap is a layout that gives its objects at most max of the width, centred, and all
// of the height: text stays a readable measure on a wide screen and wraps on a narrow one.
type widthCap struct{ max float32 }

func capWidth(maxWidth float32, objs ...fyne.CanvasObject) *fyne.Container {
	return container.New(widthCap{max: maxWidth}, objs...)
}

func (c widthCap) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var s fyne.Size
	for _, o := range objs {
		m := o.MinSize()
		s = fyne.NewSize(max(s.Width, m.Width), max(s.Height, m.Height))
	}
	return s
}

func (c widthCap) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	w := min(size.Width, c.max)
	for _, o := range objs {
		o.Resize(fyne.NewSize(w, size.Height))
		o.Move(fyne.NewPos((size.Width-w)/2, 0))
	}
}

// secondaryText is a wrapping note in the colour Fyne gives hint text: quieter than the
// body text but readable in both themes (a LowImportance label uses the disabled colour,
// which nearly vanishes against the background).
func secondaryText(text string) *widget.RichText {
	rt := widget.NewRichText(&widget.TextSegment{Text: text,
		Style: widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Inline: true}})
	rt.Wrapping = fyne.TextWrapWord
	return rt
}

// setSecondaryText changes a secondaryText's words.
func setSecondaryText(rt *widget.RichText, text string) {
	if len(rt.Segments) == 1 {
		if seg, ok := rt.Segments[0].(*widget.TextSegment); ok {
			seg.Text = text
			rt.Refresh()
		}
	}
}

// fixedWidth is an empty object that holds a column at least w wide.
func fixedWidth(w float32) fyne.CanvasObject {
	r := canvas.NewRectangle(color.Transparent)
	r.SetMinSize(fyne.NewSize(w, 0))
	return r
}
