// Package gui is Strata's desktop app (Fyne): welcome, hardware wizard, model picker,
// "Get a model" (the library: catalogue, Hugging Face downloads; the Hub client is in
// app/library), loading, chat, tier map and settings. Each screen is one file of small widget
// constructors; what the callbacks do lives in Controller, which tests drive without a
// display. Engine calls run in goroutines and widgets change only through fyne.Do.
package gui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"strata/app/library"
	"strata/app/wizard"
	"strata/engine"
)

// Screens, as STRATA_SCREENSHOT names them.
const (
	ScreenWelcome  = "welcome"
	ScreenWizard   = "wizard"
	ScreenPicker   = "picker"
	ScreenLoading  = "loading"
	ScreenChat     = "chat"
	ScreenTiers    = "tiers"
	ScreenSettings = "settings"
	ScreenLibrary  = "library" // "Get a model" (library.go)
)

// Options configure the app. Engine, Files, Advise and MakeDemo default to the real ones.
type Options struct {
	DataDir   string // chats in DataDir/chats, the demo model in DataDir/demo
	ConfigDir string // settings.json
	Engine    Engine
	Files     FilePicker
	// Advise is the hardware wizard's data source; model is the chosen model's card (zero
	// when none is chosen yet).
	Advise func(ctx context.Context, model engine.ModelInfo) (Advice, error)
	// MakeDemo writes the tiny synthetic demo model into dir and returns its path.
	MakeDemo func(ctx context.Context, dir string, progress func(done, total int64)) (string, error)
	// OpenModel is a model file to show in the picker at start ("Open with Strata").
	OpenModel string
	// Hub is the Hugging Face client of the library screen (nil: HF_ENDPOINT and HF_TOKEN).
	Hub *library.Client
	// Hardware is this PC for the catalogue's verdicts (nil: probed).
	Hardware func(ctx context.Context) wizard.Hardware
	// Reveal shows a file in the file manager (nil: the OS's).
	Reveal func(path string) error

	// post runs a function on the UI goroutine; fyne.Do unless a test sets its own loop.
	post func(func())
}

// App is the window and its screens.
type App struct {
	fy  fyne.App
	win fyne.Window
	ctl *Controller

	files  FilePicker
	post   func(func()) // runs a function on the UI goroutine
	advise func(ctx context.Context, model engine.ModelInfo) (Advice, error)

	// the library screen's Hub client, downloads (kept across visits) and OS hooks
	hub      *library.Client
	jobs     []*library.Job
	hardware func(ctx context.Context) wizard.Hardware
	reveal   func(path string) error
	dataDir  string

	// holdLoading keeps the loading screen up after the load (screenshots only).
	holdLoading bool
	openModel   string

	screen   string
	dialog   *keyedDialog // the open dialog that Enter and Esc answer, or nil
	picker   *pickerView
	loading  *loadingView
	chat     *chatView
	tiers    *tiersView
	settings *settingsView
	library  *libraryView
	tabs     *container.AppTabs
}

// New builds the app's window on fy (a real app or fyne.io/fyne/v2/test's).
func New(fy fyne.App, opts Options) (*App, error) {
	if opts.DataDir == "" || opts.ConfigDir == "" {
		return nil, errors.New("gui: DataDir and ConfigDir must be set")
	}
	if opts.Engine == nil {
		opts.Engine = engineAPI{}
	}
	if opts.Files == nil {
		opts.Files = nativeFiles{}
	}
	if opts.Advise == nil {
		opts.Advise = hostAdvice
	}
	if opts.MakeDemo == nil {
		opts.MakeDemo = makeDemo
	}
	if opts.post == nil {
		opts.post = fyne.Do
	}
	if opts.Hub == nil {
		opts.Hub = library.NewClient()
	}
	if opts.Hardware == nil {
		opts.Hardware = probeHardware
	}
	if opts.Reveal == nil {
		opts.Reveal = revealFile
	}
	ctl, err := newController(opts, opts.post)
	if err != nil {
		return nil, err
	}
	a := &App{fy: fy, ctl: ctl, files: opts.Files, advise: opts.Advise, post: opts.post, openModel: opts.OpenModel,
		hub: opts.Hub, hardware: opts.Hardware, reveal: opts.Reveal, dataDir: opts.DataDir}
	// Downloads left unfinished by the last run wait, paused, on the library screen.
	a.jobs = library.PendingJobs(a.hub, a.modelsDir())
	a.win = fy.NewWindow("Strata")
	a.win.Resize(fyne.NewSize(1100, 720))
	a.win.SetOnClosed(ctl.Close)
	a.win.Canvas().SetOnTypedKey(a.typedKey)
	ctl.setOnChange(a.refresh)
	return a, nil
}

// keyedDialog is the open dialog that Enter and Esc answer.
type keyedDialog struct {
	confirm func() // nil when Enter has nothing to confirm
	dismiss func()
}

// typedKey takes the keys no box has taken: Enter and Esc answer an open dialog, and Esc
// otherwise stops the answer being written.
func (a *App) typedKey(k *fyne.KeyEvent) {
	d := a.dialog
	switch {
	case d != nil && k.Name == fyne.KeyEscape:
		d.dismiss()
	case d != nil && d.confirm != nil && (k.Name == fyne.KeyReturn || k.Name == fyne.KeyEnter):
		d.confirm()
	case k.Name == fyne.KeyEscape:
		a.ctl.Stop()
	}
}

// showKeyed shows d with the keyboard on it: Enter runs confirm (when not nil), Esc
// closes it. The message box lets go of the keyboard, or Enter would send from under it.
func (a *App) showKeyed(d dialog.Dialog, confirm func()) {
	k := &keyedDialog{confirm: confirm, dismiss: d.Hide}
	a.dialog = k
	d.SetOnClosed(func() {
		if a.dialog != k {
			return // its answer opened another dialog, which keeps the keyboard
		}
		a.dialog = nil
		if a.chat != nil && a.screen == ScreenChat {
			a.chat.focusInput()
		}
	})
	a.win.Canvas().Unfocus()
	d.Show()
}

// Window is the app's window.
func (a *App) Window() fyne.Window { return a.win }

// Controller is the app's state, for tests and the screenshot driver.
func (a *App) Controller() *Controller { return a.ctl }

// Start shows the first screen: the welcome page on a first run, else the model picker.
func (a *App) Start() {
	a.ctl.startServerFromSettings()
	switch {
	case a.openModel != "":
		// Opened on a file: its card in the picker, one click from loading.
		a.ctl.Inspect(a.openModel)
		a.Show(ScreenPicker)
	case a.ctl.Settings().WizardDone:
		a.Show(ScreenPicker)
	default:
		a.Show(ScreenWelcome)
	}
	if err := a.ctl.SettingsProblem(); err != nil {
		a.showError("Reading your settings", err)
	}
}

// Show switches the window to a screen.
func (a *App) Show(screen string) {
	a.screen = screen
	if a.tiers != nil && screen != ScreenTiers {
		a.tiers.stop()
	}
	switch screen {
	case ScreenWelcome:
		a.win.SetContent(a.welcomeScreen())
	case ScreenWizard:
		a.win.SetContent(a.wizardScreen())
	case ScreenPicker:
		a.picker = a.newPickerView()
		a.win.SetContent(a.picker.root)
	case ScreenLibrary:
		a.library = a.newLibraryView()
		a.win.SetContent(a.library.root)
	case ScreenLoading:
		a.loading = a.newLoadingView()
		a.win.SetContent(a.loading.root)
		a.loading.update(a.ctl.LoadState())
	case ScreenChat, ScreenTiers, ScreenSettings:
		a.showMain(screen)
	default:
		slog.Warn("unknown screen", "screen", screen)
		a.Show(ScreenWelcome)
	}
}

// showMain shows the tabs of a loaded model: chat, tier map, settings.
func (a *App) showMain(tab string) {
	if a.tabs == nil {
		a.chat = a.newChatView()
		a.tiers = a.newTiersView()
		a.settings = a.newSettingsView()
		a.tabs = container.NewAppTabs(
			container.NewTabItem("Chat", a.chat.root),
			container.NewTabItem("Tier map", a.tiers.root),
			container.NewTabItem("Settings", a.settings.root),
		)
		a.tabs.OnSelected = func(t *container.TabItem) {
			switch t.Text {
			case "Chat":
				a.screen = ScreenChat
				a.tiers.stop()
				a.chat.focusInput()
			case "Tier map":
				a.screen = ScreenTiers
				a.tiers.start()
			case "Settings":
				a.screen = ScreenSettings
				a.tiers.stop()
				a.settings.reset()
			}
		}
	}
	a.win.SetContent(a.tabs)
	a.chat.update(a.ctl.Chat())
	a.chat.updateList()
	switch tab {
	case ScreenTiers:
		a.tabs.SelectIndex(1)
		a.screen = ScreenTiers
		a.tiers.start()
	case ScreenSettings:
		a.tabs.SelectIndex(2)
		a.screen = ScreenSettings
		a.settings.reset()
	default:
		a.tabs.SelectIndex(0)
		a.screen = ScreenChat
		a.chat.focusInput()
	}
}

// refresh redraws what changed; it runs on the UI goroutine.
func (a *App) refresh(topic string) {
	switch topic {
	case topicCard:
		if a.picker != nil && a.screen == ScreenPicker {
			a.picker.update()
		}
	case topicLoad:
		st := a.ctl.LoadState()
		if a.loading != nil && a.screen == ScreenLoading {
			a.loading.update(st)
		}
		if a.settings != nil {
			a.settings.loadChanged(st)
		}
	case topicChat:
		if a.chat != nil {
			a.chat.update(a.ctl.Chat())
		}
	case topicChats:
		if a.chat != nil {
			a.chat.updateList()
		}
	}
}

// showError shows a plain-language failure with what to do next.
func (a *App) showError(what string, err error) {
	if err == nil {
		return
	}
	d := dialog.NewCustom(what, "OK", wrapLabel(friendly(what, err)), a.win)
	a.showKeyed(d, d.Hide)
}

// showMessage shows a short message (a refusal, not a failure).
func (a *App) showMessage(title, text string) {
	d := dialog.NewCustom(title, "OK", wrapLabel(text), a.win)
	a.showKeyed(d, d.Hide)
}

// wrapLabel is a label that wraps, sized for a dialog.
func wrapLabel(text string) fyne.CanvasObject {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return container.NewGridWrap(fyne.NewSize(460, l.MinSize().Height*float32(1+len(text)/60)), l)
}

// humanBytes writes a byte count the way a person reads it.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// humanCount writes a parameter count (1.2B, 350M).
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}
