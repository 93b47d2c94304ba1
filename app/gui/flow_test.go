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
	a := adviceFrom(h, wizard.Recommend(wizard.HardwareFromHost(h, nil), wizard.Model{}))
	machineOnly(&a, h)
	return a, nil
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

// button finds the visible button with this label in the window (call it on the UI loop).
func button(w fyne.Window, label string) *widget.Button {
	var found *widget.Button
	objects(w.Canvas().Content(), func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text == label && b.Visible() {
			found = b
		}
	})
	return found
}

// windowText is all label and rich text on screen, for looking for a phrase (call it on
// the UI loop).
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

// gui gives tests one goroutine for everything that touches widgets.
type gui struct {
	t  *testing.T
	ui *uiLoop
}

// tap presses the button with this label, failing when there is none.
func (g gui) tap(w fyne.Window, label string) {
	g.t.Helper()
	var ok bool
	g.ui.do(func() {
		if b := button(w, label); b != nil && !b.Disabled() {
			test.Tap(b)
			ok = true
		}
	})
	if !ok {
		g.t.Fatalf("no enabled %q button on screen", label)
	}
}

// text is what the window shows.
func (g gui) text(w fyne.Window) string {
	var s string
	g.ui.do(func() { s = windowText(w) })
	return s
}

// until waits for cond, evaluated on the UI loop.
func (g gui) until(what string, cond func() bool) {
	g.t.Helper()
	waitFor(g.t, what, func() bool {
		var ok bool
		g.ui.do(func() { ok = cond() })
		return ok
	})
}

// newTestApp makes the app on temporary folders with a UI loop of its own.
func newTestApp(t *testing.T, opts Options) (*App, gui) {
	t.Helper()
	g := gui{t: t, ui: newUILoop(t)}
	opts.post = g.ui.post
	var a *App
	var err error
	g.ui.do(func() { a, err = New(fyne.CurrentApp(), opts) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.ctl.Close)
	return a, g
}

// runFlow drives the app as a person would: welcome -> wizard -> picker -> load -> send ->
// tokens appear -> Esc -> the chat is saved and reloads after a restart.
func runFlow(t *testing.T, eng Engine, model string) {
	test.NewTempApp(t)
	dir := t.TempDir()
	opts := Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"),
		Engine: eng, Files: filesFrom(model), Advise: testAdvice}
	a, g := newTestApp(t, opts)
	w := a.Window()
	g.ui.do(a.Start)
	if a.screen != ScreenWelcome {
		t.Fatalf("first run opened %q, want the welcome page", a.screen)
	}

	g.tap(w, "Set up this PC")
	g.until("the wizard's advice", func() bool { b := button(w, "Use this"); return b != nil && !b.Disabled() })
	if txt := g.text(w); !strings.Contains(txt, "Test CPU with 8 cores") || !strings.Contains(txt, "Recommended: CPU only") ||
		!strings.Contains(txt, "No NVIDIA graphics card was found") {
		t.Fatalf("wizard shows:\n%s", txt)
	}
	g.tap(w, "Use this")
	g.ui.do(func() {})
	if a.screen != ScreenPicker || !a.ctl.Settings().WizardDone {
		t.Fatalf("after accepting: screen %q, settings %+v", a.screen, a.ctl.Settings())
	}

	g.tap(w, "Open GGUF…")
	waitFor(t, "the model card", func() bool {
		_, info, err := a.ctl.Card()
		return err != nil || info.Architecture != ""
	})
	if _, _, err := a.ctl.Card(); err != nil {
		t.Fatalf("inspect %s: %v", model, err)
	}
	g.until("the card on screen", func() bool { return strings.Contains(a.picker.card.Text, "Architecture: qwen3moe") })
	g.tap(w, "Load this model")
	g.until("the chat screen with the ready time", func() bool {
		return a.ctl.LoadState().Err != nil || strings.Contains(windowText(w), "Ready in")
	})
	if err := a.ctl.LoadState().Err; err != nil {
		t.Fatalf("load: %v\nscreen says:\n%s", err, g.text(w))
	}

	g.ui.do(func() {
		test.Type(a.chat.input, "Hello")
		a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	})
	if v := a.ctl.Chat(); len(v.Chat.Messages) == 0 || v.Chat.Messages[0].Content != "Hello" {
		t.Fatalf("Enter did not send: %+v", v.Chat.Messages)
	}
	waitFor(t, "tokens", func() bool {
		v := a.ctl.Chat()
		if v.Err != "" {
			t.Fatalf("generation failed: %s", v.Err)
		}
		if !v.Generating && len(v.Chat.Messages) == 2 && v.Chat.Messages[1].Content == "" {
			t.Fatalf("generation ended with no answer text: %+v", v.Chat.Messages[1])
		}
		return len(v.Chat.Messages) == 2 && len(v.Chat.Messages[1].Content) > 0
	})
	g.until("tokens on screen", func() bool {
		return len(a.chat.messages.Objects) == 2 && a.chat.input.Text == ""
	})
	g.ui.do(func() { a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape}) })
	a.ctl.Wait()
	view := a.ctl.Chat()
	if view.Generating || len(view.Chat.Messages) != 2 || view.Chat.Messages[1].Content == "" {
		t.Fatalf("after Esc: %+v", view)
	}
	shown := view.Chat.Messages[1]

	// Shift+Enter is a new line, not a send.
	var input string
	g.ui.do(func() {
		a.chat.input.KeyDown(&fyne.KeyEvent{Name: "LeftShift"})
		a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		a.chat.input.KeyUp(&fyne.KeyEvent{Name: "LeftShift"})
		input = a.chat.input.Text
	})
	if input != "\n" || len(a.ctl.Chat().Chat.Messages) != 2 {
		t.Fatalf("Shift+Enter: input %q, %d messages", input, len(a.ctl.Chat().Chat.Messages))
	}

	// The tier map tab draws the model's snapshot.
	g.ui.do(func() { a.Show(ScreenTiers) })
	g.until("the tier map", func() bool { return snapshotOK(a.tiers.grid.snap) })
	g.ui.do(func() { a.Show(ScreenChat) })

	// Restart on the same folders: the chat is in the sidebar and opens as it was.
	a.ctl.Close()
	b, g2 := newTestApp(t, opts)
	g2.ui.do(b.Start)
	if b.screen != ScreenPicker {
		t.Fatalf("second run opened %q, want the model picker", b.screen)
	}
	var listed []store.Chat
	g2.ui.do(func() {
		b.Show(ScreenChat)
		listed = b.chat.chats
	})
	if len(listed) != 1 || listed[0].ID != view.Chat.ID {
		t.Fatalf("sidebar after restart: %+v", listed)
	}
	g2.ui.do(func() { b.chat.list.Select(0) })
	got := b.ctl.Chat().Chat
	if len(got.Messages) != 2 || got.Messages[1].Content != shown.Content || got.Messages[1].Stopped != shown.Stopped {
		t.Fatalf("reopened chat %+v, want the answer %+v", got.Messages, shown)
	}
	// The answer's own line (speed, stopped) and the question are drawn again.
	g2.until("the reopened chat on screen", func() bool {
		txt := windowText(b.Window())
		return strings.Contains(txt, "Hello") && strings.Contains(txt, tokensPerSecLabel(shown))
	})
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
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"), Engine: &fakeEngine{}, Advise: testAdvice})
	var status string
	g.ui.do(func() {
		a.Show(ScreenSettings)
		v := a.settings
		v.maxContext.SetText("lots")
		v.vramReserve.SetText("-1")
		test.Tap(v.save)
		status = v.status.Text
	})
	if !strings.Contains(status, "context length") || !strings.Contains(status, "VRAM reserve") {
		t.Fatalf("status %q should name both bad fields", status)
	}
	if _, err := os.Stat(store.SettingsPath(filepath.Join(dir, "c"))); !os.IsNotExist(err) {
		t.Fatalf("bad settings were saved: %v", err)
	}
	g.ui.do(func() {
		v := a.settings
		v.maxContext.SetText("4096")
		v.vramReserve.SetText("512")
		v.kvType.SetSelected("int8")
		test.Tap(v.save)
		status = v.status.Text
	})
	s, err := store.LoadSettings(store.SettingsPath(filepath.Join(dir, "c")))
	if err != nil || s.Config.MaxContext != 4096 || s.Config.VRAMReserveMiB != 512 || s.Config.KVType != "int8" {
		t.Fatalf("saved %+v, %v (status %q)", s.Config, err, status)
	}
}

// TestOpenWithModelShowsItsCard: "Open with Strata" on a .gguf starts on the picker with
// that model's card, whatever the first-run state.
func TestOpenWithModelShowsItsCard(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	model, err := makeDemo(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"),
		Advise: testAdvice, OpenModel: model})
	g.ui.do(a.Start)
	if a.screen != ScreenPicker {
		t.Fatalf("opened %q, want the picker", a.screen)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, info, err := a.ctl.Card(); err == nil && info.Architecture == "qwen3moe" {
			break
		} else if err != nil || time.Now().After(deadline) {
			t.Fatalf("card: %+v, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
