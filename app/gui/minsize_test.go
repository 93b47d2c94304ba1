package gui

import (
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/app/store"
)

// maxMinSize is the most any screen may ask for: half of a 1280-wide screen, and a
// 1280x800 screen with room to spare for the title bar and the taskbar.
var maxMinSize = fyne.NewSize(640, 480)

// TestScreensFitHalfAScreen: every screen's minimum size (with a loaded model, a chat
// holding long text, thinking and code, a downloaded model) fits in 640x480, so the
// window can be tiled to half of a 1280-wide screen; and no screen draws text in the
// disabled colour.
func TestScreensFitHalfAScreen(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	model := writeFakeModel(t)
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c"),
		Engine: &fakeEngine{}, Advise: testAdvice, Files: filesFrom(model)})
	w := a.Window()
	measure := func(screen string, show func()) {
		t.Helper()
		var got fyne.Size
		var faint string
		g.ui.do(func() {
			show()
			got = w.Canvas().Content().MinSize()
			faint = ""
			objects(w.Canvas().Content(), func(o fyne.CanvasObject) {
				if l, ok := o.(*widget.Label); ok && l.Visible() && l.Importance == widget.LowImportance && l.Text != "" {
					faint = l.Text
				}
			})
			if w.Padded() {
				got = got.AddWidthHeight(2*theme.Padding(), 2*theme.Padding())
			}
		})
		t.Logf("%-16s min %4.0f x %4.0f", screen, got.Width, got.Height)
		if faint != "" {
			t.Errorf("%s shows %q in the disabled colour (LowImportance), which is barely readable", screen, faint)
		}
		if got.Width > maxMinSize.Width || got.Height > maxMinSize.Height {
			t.Errorf("%s needs at least %.0f x %.0f, more than %.0f x %.0f", screen, got.Width, got.Height, maxMinSize.Width, maxMinSize.Height)
		}
	}
	measure(ScreenWelcome, func() { a.Show(ScreenWelcome) })
	measure(ScreenWizard, func() { a.Show(ScreenWizard) })
	g.until("the wizard's advice", func() bool { b := button(w, "Use this"); return b != nil && !b.Disabled() })
	measure(ScreenWizard+" (advice)", func() {})
	// The library lists a downloaded model with a long name.
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "Qwen3-Coder-480B-A35B-Instruct-UD-Q4_K_XL-with-a-long-name.gguf"), []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := a.ctl.Settings()
	s.ModelsDir = models
	if err := a.ctl.saveSettings(s); err != nil {
		t.Fatal(err)
	}
	g.ui.do(func() { a.Show(ScreenLibrary) })
	g.until("the downloaded model listed", func() bool { return buttonIn(a.library.local, "Show in folder") != nil })
	measure(ScreenLibrary, func() {})
	measure("settings (alone)", a.showSettingsAlone)

	a.ctl.Inspect(model)
	waitFor(t, "the card", func() bool { _, info, _ := a.ctl.Card(); return info.Architecture != "" })
	measure(ScreenPicker, func() { a.Show(ScreenPicker) })
	loadFake(t, a.ctl, model)
	measure(ScreenLoading, func() { a.holdLoading = true; a.Show(ScreenLoading) })
	a.holdLoading = false

	long := "A long answer with a path /usr/local/share/strata/models/some-very-long-model-name-Q4_K_M.gguf and `inline code` in it. "
	msgs := []store.Message{
		{Role: "user", Content: "Explain the tiers, please, in one long paragraph that runs on and on."},
		{Role: "assistant", Thinking: "first the tiers", Content: long + long + "\n\n```go\nfunc main() { fmt.Println(\"a long line of code that does not wrap at all, since code keeps its lines\") }\n```\n", TokensPerSec: 42},
	}
	measure(ScreenChat, func() {
		a.Show(ScreenChat)
		a.chat.update(ChatView{Chat: store.Chat{Title: "A chat with a very long title that goes on and on", Messages: msgs}, HasModel: true})
	})
	measure(ScreenTiers, func() { a.Show(ScreenTiers); a.tiers.refreshNow() })
	measure(ScreenSettings, func() { a.Show(ScreenSettings) })
}
