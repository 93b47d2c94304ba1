package gui

import (
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"strata/app/store"
)

func TestCodeBlockCopyAndFoldedThinking(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"), Engine: &fakeEngine{}, Advise: testAdvice})
	msg := store.Message{Role: "assistant", Thinking: "let me think", Content: "Here:\n```go\nx := 1\n```\nDone.", TokensPerSec: 12.5}
	var copied string
	var folded, hasSpeed bool
	g.ui.do(func() {
		a.Show(ScreenChat)
		view := a.chat.messageView(msg, false)
		w := test.NewWindow(view)
		defer w.Close()
		if b := button(w, "Copy"); b != nil {
			test.Tap(b)
			copied = fyne.CurrentApp().Clipboard().Content()
		}
		objects(view, func(o fyne.CanvasObject) {
			switch x := o.(type) {
			case *widget.Accordion:
				folded = len(x.Items) == 1 && x.Items[0].Title == "Thinking" && !x.Items[0].Open
			case *widget.Label:
				hasSpeed = hasSpeed || x.Text == "12.5 tokens/s"
			}
		})
	})
	if copied != "x := 1" {
		t.Errorf("Copy put %q on the clipboard, want the code", copied)
	}
	if !folded {
		t.Error("the thinking part is not folded under a closed Thinking toggle")
	}
	if !hasSpeed {
		t.Error("no tokens/s line under the answer")
	}
}
