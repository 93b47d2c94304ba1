package gui

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"strata/app/store"
)

// appID is the application id Fyne keys its preferences on.
const appID = "org.strata.desktop"

// Main opens the desktop app and returns when its window is closed: the entry point for
// `strata` with no arguments, or with one model file ("Open with Strata" on a .gguf), which
// the picker then shows. STRATA_SCREENSHOT=<screen> opens that screen with the demo model
// (for `make screenshots`).
func Main(model string) int {
	cfgDir, err := store.ConfigDir()
	if err == nil {
		var dataDir string
		dataDir, err = store.DataDir()
		if err == nil {
			return run(Options{DataDir: dataDir, ConfigDir: cfgDir, OpenModel: model}, os.Getenv("STRATA_SCREENSHOT"))
		}
	}
	fmt.Fprintf(os.Stderr, "strata: %v\n", err)
	return 1
}

func run(opts Options, screenshot string) int {
	fy := fyneapp.NewWithID(appID)
	a, err := New(fy, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "strata: %v\n", err)
		return 1
	}
	if screenshot != "" {
		var w, h float32
		if _, err := fmt.Sscanf(os.Getenv("STRATA_SCREENSHOT_SIZE"), "%gx%g", &w, &h); err == nil && w > 0 && h > 0 {
			a.Window().Resize(fyne.NewSize(w, h)) // the virtual screen has no window manager to do it
		}
		// Drive the app once its loop runs: fyne.DoAndWait needs the loop.
		fy.Lifecycle().SetOnStarted(func() { go driveTo(a, screenshot) })
	} else {
		a.Start()
	}
	a.Window().ShowAndRun()
	return 0
}

// driveTo opens a screen for a screenshot and prints "screenshot ready" when it is drawn:
// the demo model is loaded for the screens that need one, and the chat gets one exchange.
func driveTo(a *App, screen string) {
	show := func(s string) { fyne.DoAndWait(func() { a.Show(s) }) }
	ready := func() {
		time.Sleep(1500 * time.Millisecond) // a few frames for the window to draw (software GL is slow)
		fmt.Println("strata: screenshot ready:", screen)
	}
	switch screen {
	case ScreenWelcome:
		show(screen)
		ready()
		return
	case ScreenPicker:
		// The card of the demo model, as after Open GGUF….
		path, err := a.ctl.makeDemo(context.Background(), a.ctl.demoDir, nil)
		if err != nil {
			slog.Error("screenshot: demo model", "err", err)
			return
		}
		a.ctl.Inspect(path)
		for _, info, err := a.ctl.Card(); err == nil && info.Architecture == ""; _, info, err = a.ctl.Card() {
			time.Sleep(50 * time.Millisecond)
		}
		show(screen)
		ready()
		return
	case ScreenWizard, ScreenLibrary:
		show(screen)
		time.Sleep(3 * time.Second) // the hardware probe
		ready()
		return
	}
	fyne.DoAndWait(func() {
		a.holdLoading = screen == ScreenLoading
		a.startDemo()
	})
	for st := a.ctl.LoadState(); st.Loading; st = a.ctl.LoadState() {
		time.Sleep(50 * time.Millisecond)
	}
	if st := a.ctl.LoadState(); st.Err != nil {
		slog.Error("screenshot: demo model", "err", st.Err)
		return
	}
	if screen == ScreenLoading {
		ready()
		return
	}
	if screen == ScreenChat || screen == ScreenTiers {
		sp, _ := a.ctl.Sampling()
		sp.MaxTokens = 80
		if err := a.ctl.SetAdvanced(fieldsOf(sp)); err != nil {
			slog.Error("screenshot: sampling", "err", err)
		}
		a.ctl.SetSystem("You are a helpful assistant.")
		if err := a.ctl.Send("Explain in one paragraph what a Mixture-of-Experts model is, with a short Go example."); err != nil {
			slog.Error("screenshot: send", "err", err)
		}
		a.ctl.Wait()
	}
	show(screen)
	ready()
}
