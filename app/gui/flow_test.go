package gui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"strata/app/store"
	"strata/app/wizard"
	"strata/engine"
	"strata/platform"
)

// filesFrom is a FilePicker that answers with a fixed path instead of opening a dialog.
type filesFrom string

func (f filesFrom) OpenGGUF() (string, error) { return string(f), nil }

// testAdvice is the wizard's answer for a fixed machine (8 cores, 32 GiB, no GPU), so the
// test does not depend on the PC it runs on.
func testAdvice(context.Context, engine.ModelInfo) (Advice, error) {
	h := platform.Host{
		CPU: platform.CPU{Model: "Test CPU", PhysicalCores: 8, LogicalCores: 16, AVX2: true},
		RAM: platform.Memory{TotalBytes: 32 << 30, AvailableBytes: 24 << 30},
	}
	return adviceFrom(h, wizard.Recommend(wizard.HardwareFromHost(h, nil), wizard.Model{})), nil
}

// objects walks everything drawn under o.
func objects(o fyne.CanvasObject, visit func(fyne.CanvasObject)) {
	if o == nil {
		return
	}
	visit(o)
	switch x := o.(type) {
	case *fyne.Container:
		for _, c := range x.Objects {
			objects(c, visit)
		}
	case fyne.Widget:
		for _, c := range test.WidgetRenderer(x).Objects() {
			objects(c, visit)
		}
	}
}

// button finds the visible button with this label in the window.
func button(t *testing.T, w fyne.Window, label string) *widget.Button {
	t.Helper()
	var found *widget.Button
	objects(w.Canvas().Content(), func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text == label && b.Visible() {
			found = b
		}
	})
	if found == nil {
		t.Fatalf("no %q button on screen", label)
	}
	return found
}

// windowText is all label and rich text on screen, for looking for a phrase.
func windowText(w fyne.Window) string {
	var b strings.Builder
	objects(w.Canvas().Content(), func(o fyne.CanvasObject) {
		switch x := o.(type) {
		case *widget.Label:
			b.WriteString(x.Text + "\n")
		case *widget.RichText:
			b.WriteString(x.String() + "\n")
		}
	})
	return b.String()
}

// runFlow drives the app as a person would: welcome -> wizard -> picker -> load -> send ->
// tokens appear -> Esc -> the chat is saved and reloads after a restart.
func runFlow(t *testing.T, eng Engine, model string) {
	test.NewTempApp(t)
	dir := t.TempDir()
	opts := Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"),
		Engine: eng, Files: filesFrom(model), Advise: testAdvice}
	a, err := New(fyne.CurrentApp(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.ctl.Close)
	w := a.Window()
	a.Start()
	if a.screen != ScreenWelcome {
		t.Fatalf("first run opened %q, want the welcome page", a.screen)
	}

	test.Tap(button(t, w, "Set up this PC"))
	waitFor(t, "the wizard's advice", func() bool { return !button(t, w, "Use this").Disabled() })
	if txt := windowText(w); !strings.Contains(txt, "Test CPU with 8 cores") || !strings.Contains(txt, "Recommended: CPU only") {
		t.Fatalf("wizard shows:\n%s", txt)
	}
	test.Tap(button(t, w, "Use this"))
	if a.screen != ScreenPicker || !a.ctl.Settings().WizardDone {
		t.Fatalf("after accepting: screen %q, settings %+v", a.screen, a.ctl.Settings())
	}

	test.Tap(button(t, w, "Open GGUF…"))
	waitFor(t, "the model card", func() bool { _, _, err := a.ctl.Card(); return err != nil || !a.picker.load.Disabled() })
	if _, _, err := a.ctl.Card(); err != nil {
		t.Fatalf("inspect %s: %v", model, err)
	}
	if !strings.Contains(a.picker.card.Text, "Architecture: qwen3moe") {
		t.Fatalf("card:\n%s", a.picker.card.Text)
	}
	test.Tap(a.picker.load)
	waitFor(t, "the chat screen with the ready time", func() bool {
		return a.ctl.LoadState().Err != nil || strings.Contains(windowText(w), "Ready in")
	})
	if err := a.ctl.LoadState().Err; err != nil {
		t.Fatalf("load: %v\nscreen says:\n%s", err, windowText(w))
	}

	test.Type(a.chat.input, "Hello")
	a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	if a.chat.input.Text != "" {
		t.Fatalf("Enter did not send: input still %q", a.chat.input.Text)
	}
	waitFor(t, "tokens on screen", func() bool {
		v := a.ctl.Chat()
		if v.Err != "" {
			t.Fatalf("generation failed: %s", v.Err)
		}
		if !v.Generating && len(v.Chat.Messages) == 2 && v.Chat.Messages[1].Content == "" {
			t.Fatalf("generation ended with no answer text: %+v", v.Chat.Messages[1])
		}
		return len(v.Chat.Messages) == 2 && len(v.Chat.Messages[1].Content) > 0 && len(a.chat.messages.Objects) == 2
	})
	a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	a.ctl.Wait()
	view := a.ctl.Chat()
	if view.Generating || len(view.Chat.Messages) != 2 || view.Chat.Messages[1].Content == "" {
		t.Fatalf("after Esc: %+v", view)
	}
	shown := view.Chat.Messages[1]

	// Shift+Enter is a new line, not a send.
	a.chat.input.KeyDown(&fyne.KeyEvent{Name: "LeftShift"})
	a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	a.chat.input.KeyUp(&fyne.KeyEvent{Name: "LeftShift"})
	if a.chat.input.Text != "\n" || len(a.ctl.Chat().Chat.Messages) != 2 {
		t.Fatalf("Shift+Enter: input %q, %d messages", a.chat.input.Text, len(a.ctl.Chat().Chat.Messages))
	}

	// The tier map tab draws the model's snapshot.
	a.Show(ScreenTiers)
	waitFor(t, "the tier map", func() bool { return snapshotOK(a.tiers.grid.snap) })
	a.Show(ScreenChat)

	// Restart on the same folders: the chat is in the sidebar and opens as it was.
	a.ctl.Close()
	b, err := New(fyne.CurrentApp(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.ctl.Close)
	b.Start()
	if b.screen != ScreenPicker {
		t.Fatalf("second run opened %q, want the model picker", b.screen)
	}
	b.Show(ScreenChat)
	if len(b.chat.chats) != 1 || b.chat.chats[0].ID != view.Chat.ID {
		t.Fatalf("sidebar after restart: %+v", b.chat.chats)
	}
	b.chat.list.Select(0)
	got := b.ctl.Chat().Chat
	if len(got.Messages) != 2 || got.Messages[1].Content != shown.Content || got.Messages[1].Stopped != shown.Stopped {
		t.Fatalf("reopened chat %+v, want the answer %+v", got.Messages, shown)
	}
	if !strings.Contains(windowText(b.Window()), strings.TrimSpace(shown.Content)[:2]) {
		t.Fatalf("the reopened answer is not on screen:\n%s", windowText(b.Window()))
	}
}

// TestFlowFakeEngine runs the whole flow on a stand-in engine: it checks the app itself.
func TestFlowFakeEngine(t *testing.T) {
	runFlow(t, &fakeEngine{tokenDelay: 2 * time.Millisecond}, writeFakeModel(t))
}

// TestFlowEngine runs the whole flow on the real engine with the demo model (a small
// synthetic Qwen3-MoE written by engine/synth). It needs a working engine: Inspect, Open,
// Chat and Tiers.
func TestFlowEngine(t *testing.T) {
	model, err := makeDemo(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	runFlow(t, engineAPI{}, model)
}

func TestSettingsPanelRefusesBadValues(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	a, err := New(fyne.CurrentApp(), Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"), Engine: &fakeEngine{}, Advise: testAdvice})
	if err != nil {
		t.Fatal(err)
	}
	a.Show(ScreenSettings)
	v := a.settings
	v.maxContext.SetText("lots")
	v.vramReserve.SetText("-1")
	test.Tap(v.save)
	if !strings.Contains(v.status.Text, "context length") || !strings.Contains(v.status.Text, "VRAM reserve") {
		t.Fatalf("status %q should name both bad fields", v.status.Text)
	}
	if _, err := os.Stat(store.SettingsPath(filepath.Join(dir, "c"))); !os.IsNotExist(err) {
		t.Fatalf("bad settings were saved: %v", err)
	}
	v.maxContext.SetText("4096")
	v.vramReserve.SetText("512")
	v.kvType.SetSelected("int8")
	test.Tap(v.save)
	s, err := store.LoadSettings(store.SettingsPath(filepath.Join(dir, "c")))
	if err != nil || s.Config.MaxContext != 4096 || s.Config.VRAMReserveMiB != 512 || s.Config.KVType != "int8" {
		t.Fatalf("saved %+v, %v (status %q)", s.Config, err, v.status.Text)
	}
}
