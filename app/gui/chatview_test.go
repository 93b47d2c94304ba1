package gui

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			case *widget.RichText:
				hasSpeed = hasSpeed || x.String() == "12.5 tokens/s"
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

// TestSidebarListsChatAfterFirstMessage: the chat being written appears in the sidebar,
// selected, as soon as its first message is sent, not only once the answer is saved.
func TestSidebarListsChatAfterFirstMessage(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"),
		Engine: &fakeEngine{tokenDelay: 5 * time.Millisecond}, Advise: testAdvice})
	loadFake(t, a.ctl, writeFakeModel(t))
	g.ui.do(func() { a.Show(ScreenChat) })
	g.ui.do(func() {
		test.Type(a.chat.input, "Hello sidebar")
		a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	})
	g.ui.do(func() {}) // the refreshes Send posted have run
	id := a.ctl.Chat().Chat.ID
	var listed, ids []string
	var shown bool
	g.ui.do(func() {
		for _, ch := range a.chat.chats {
			listed = append(listed, ch.Title)
			ids = append(ids, ch.ID)
		}
		shown = strings.Contains(windowText(a.Window()), "Hello sidebar")
	})
	generating := a.ctl.Chat().Generating
	a.ctl.StopGeneration()
	if !generating {
		t.Fatal("the answer finished before the sidebar was looked at; the test needs a longer answer")
	}
	if len(listed) != 1 || listed[0] != "Hello sidebar" {
		t.Fatalf("sidebar lists %q while the first answer is written, want the open chat", listed)
	}
	if ids[0] != id {
		t.Errorf("sidebar lists chat %s, the open one is %s", ids[0], id)
	}
	if !shown {
		t.Error("the sidebar's row for the open chat is not drawn")
	}
}

// TestChatKeepsTheKeyboard: the message box has the keyboard back after a tab switch and
// after renaming, and the rename dialog takes typing and Enter at once.
func TestChatKeepsTheKeyboard(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"),
		Engine: &fakeEngine{}, Advise: testAdvice})
	loadFake(t, a.ctl, writeFakeModel(t))
	w := a.Window()
	g.ui.do(func() { a.Show(ScreenChat) }) // before SetAdvanced: a new chat view sets its preset
	sp, _ := a.ctl.Sampling()
	sp.MaxTokens = 4
	if err := a.ctl.SetAdvanced(fieldsOf(sp)); err != nil {
		t.Fatal(err)
	}
	if err := a.ctl.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	a.ctl.Wait()

	var focused fyne.Focusable
	g.ui.do(func() {
		a.tabs.SelectIndex(1)
		w.Canvas().Unfocus() // clicking a tab takes the keyboard away
		a.tabs.SelectIndex(0)
		focused = w.Canvas().Focused()
	})
	if focused != a.chat.input {
		t.Errorf("back on the chat tab the keyboard is in %T, want the message box", focused)
	}

	g.tap(w, "Rename")
	var name *widget.Entry
	g.ui.do(func() {
		name, _ = w.Canvas().Focused().(*widget.Entry)
		if name != nil {
			test.Type(name, "Renamed chat")
			name.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
			focused = w.Canvas().Focused()
		}
	})
	if name == nil {
		t.Fatal("the rename dialog's name box does not have the keyboard")
	}
	if got := a.ctl.Chat().Chat.Title; got != "Renamed chat" {
		t.Errorf("typing a name and Enter gave the title %q", got)
	}
	if focused != a.chat.input {
		t.Errorf("after renaming the keyboard is in %T, want the message box", focused)
	}

	// Edit and resend opens with the message, wide enough to edit a few lines of it.
	g.tap(w, "Edit last")
	var edit *widget.Entry
	g.ui.do(func() { edit, _ = w.Canvas().Focused().(*widget.Entry) })
	if edit == nil || edit.Text != "Hello" {
		t.Fatalf("the edit dialog's box has not the keyboard and the message: %+v", edit)
	}
	if width := edit.Size().Width; width < 400 {
		t.Errorf("the edit box is %.0f wide, want room for a line of a message", width)
	}
}

// TestDeleteDialogTakesEnterAndEsc: Esc closes the delete question and keeps the chat;
// Enter deletes it; the message box does not take those keys from under the dialog.
func TestDeleteDialogTakesEnterAndEsc(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"),
		Engine: &fakeEngine{}, Advise: testAdvice})
	loadFake(t, a.ctl, writeFakeModel(t))
	w := a.Window()
	g.ui.do(func() { a.Show(ScreenChat) })
	sp, _ := a.ctl.Sampling()
	sp.MaxTokens = 4
	if err := a.ctl.SetAdvanced(fieldsOf(sp)); err != nil {
		t.Fatal(err)
	}
	if err := a.ctl.Send("Keep me"); err != nil {
		t.Fatal(err)
	}
	a.ctl.Wait()
	key := func(name fyne.KeyName) {
		g.ui.do(func() {
			if f := w.Canvas().Focused(); f != nil {
				f.TypedKey(&fyne.KeyEvent{Name: name}) // a box with the keyboard takes it
			} else {
				w.Canvas().OnTypedKey()(&fyne.KeyEvent{Name: name})
			}
		})
	}
	saved := func() int {
		chats, err := a.ctl.Chats()
		if err != nil {
			t.Fatal(err)
		}
		return len(chats)
	}
	g.tap(w, "Delete")
	key(fyne.KeyEscape)
	if n := saved(); n != 1 {
		t.Fatalf("Esc on the delete question left %d chats, want the one kept", n)
	}
	g.tap(w, "Delete")
	key(fyne.KeyReturn)
	if n := saved(); n != 0 {
		t.Errorf("Enter on the delete question left %d chats, want it deleted", n)
	}
	var focused fyne.Focusable
	g.ui.do(func() { focused = w.Canvas().Focused() })
	if focused != a.chat.input {
		t.Errorf("after the delete the keyboard is in %T, want the message box", focused)
	}
}

// TestNewChatOffersOnlyWhatItCanDo: Edit last and Regenerate are off in a new chat and on
// once there is an answer.
func TestNewChatOffersOnlyWhatItCanDo(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"),
		Engine: &fakeEngine{}, Advise: testAdvice})
	loadFake(t, a.ctl, writeFakeModel(t))
	g.ui.do(func() { a.Show(ScreenChat) })
	var edit, regen bool
	g.ui.do(func() { edit, regen = !a.chat.edit.Disabled(), !a.chat.regenerate.Disabled() })
	if edit || regen {
		t.Errorf("in a new chat Edit last is on: %v, Regenerate is on: %v", edit, regen)
	}
	sp, _ := a.ctl.Sampling()
	sp.MaxTokens = 4
	if err := a.ctl.SetAdvanced(fieldsOf(sp)); err != nil {
		t.Fatal(err)
	}
	if err := a.ctl.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	a.ctl.Wait()
	g.ui.do(func() {}) // the refresh after the answer has run
	g.ui.do(func() { edit, regen = !a.chat.edit.Disabled(), !a.chat.regenerate.Disabled() })
	if !edit || !regen {
		t.Errorf("after an answer Edit last is on: %v, Regenerate is on: %v", edit, regen)
	}
}
