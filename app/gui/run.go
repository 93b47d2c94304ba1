package gui

import (
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
// `strata` with no arguments. STRATA_SCREENSHOT=<screen> opens that screen with the demo
// model (for `make screenshots`).
func Main() int {
	cfgDir, err := store.ConfigDir()
	if err == nil {
		var dataDir string
		dataDir, err = store.DataDir()
		if err == nil {
			return run(Options{DataDir: dataDir, ConfigDir: cfgDir}, os.Getenv("STRATA_SCREENSHOT"))
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
		go driveTo(a, screenshot)
	} else {
		a.Start()
	}
	a.Window().ShowAndRun()
	return 0
}

// driveTo opens a screen for a screenshot: the demo model is loaded for the screens that
// need one, and the chat gets one exchange.
func driveTo(a *App, screen string) {
	show := func(s string) { fyne.DoAndWait(func() { a.Show(s) }) }
	switch screen {
	case ScreenWelcome, ScreenWizard, ScreenPicker:
		show(screen)
		return
	}
	fyne.DoAndWait(a.startDemo)
	if screen == ScreenLoading {
		return
	}
	for st := a.ctl.LoadState(); st.Loading; st = a.ctl.LoadState() {
		time.Sleep(50 * time.Millisecond)
	}
	if st := a.ctl.LoadState(); st.Err != nil {
		slog.Error("screenshot: demo model", "err", st.Err)
		return
	}
	if screen == ScreenChat || screen == ScreenTiers {
		if err := a.ctl.Send("Explain in one paragraph what a Mixture-of-Experts model is, with a short Go example."); err != nil {
			slog.Error("screenshot: send", "err", err)
		}
		a.ctl.Wait()
	}
	show(screen)
}
