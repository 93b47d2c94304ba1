package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// promptEntry is the message box: Enter sends, Shift+Enter starts a new line, Esc stops
// the answer being written.
type promptEntry struct {
	widget.Entry
	onSend func()
	onStop func()
	shift  bool
}

func newPromptEntry(onSend, onStop func()) *promptEntry {
	e := &promptEntry{onSend: onSend, onStop: onStop}
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	e.SetPlaceHolder("Write a message. Enter sends, Shift+Enter starts a new line, Esc stops.")
	e.ExtendBaseWidget(e)
	return e
}

// KeyDown tracks Shift (the entry also uses it for selection).
func (e *promptEntry) KeyDown(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = true
	}
	e.Entry.KeyDown(k)
}

// KeyUp tracks Shift.
func (e *promptEntry) KeyUp(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = false
	}
	e.Entry.KeyUp(k)
}

// TypedKey sends on Enter and stops on Esc; everything else is ordinary editing.
func (e *promptEntry) TypedKey(k *fyne.KeyEvent) {
	switch {
	case (k.Name == fyne.KeyReturn || k.Name == fyne.KeyEnter) && !e.shift:
		e.onSend()
	case k.Name == fyne.KeyEscape:
		e.onStop()
	default:
		e.Entry.TypedKey(k)
	}
}
