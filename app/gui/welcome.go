package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// welcomeScreen is the first-run page: what Strata is and the three ways on.
func (a *App) welcomeScreen() fyne.CanvasObject {
	title := widget.NewLabelWithStyle("Welcome to Strata", fyne.TextAlignCenter, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText
	intro := widget.NewLabel("Strata runs very large Mixture-of-Experts models on an ordinary PC. " +
		"It keeps the experts a model uses most in your graphics card, the next ones in RAM and the rest on the SSD.")
	intro.Wrapping = fyne.TextWrapWord
	intro.Alignment = fyne.TextAlignCenter

	get := widget.NewButtonWithIcon("Get a model", theme.DownloadIcon(), func() { a.Show(ScreenLibrary) })
	get.Importance = widget.HighImportance
	demo := widget.NewButtonWithIcon("Try the demo", theme.MediaPlayIcon(), a.startDemo)
	setup := widget.NewButtonWithIcon("Set up this PC", theme.ComputerIcon(), func() { a.Show(ScreenWizard) })
	open := widget.NewButtonWithIcon("I have a model", theme.FolderOpenIcon(), func() { a.Show(ScreenPicker) })
	demoNote := secondaryText("Get a model lists models that suit this PC and downloads one from Hugging Face. The demo makes a tiny model with random weights on the spot: no download, but its answers are noise.")
	demoNote.Segments[0].(*widget.TextSegment).Style.Alignment = fyne.TextAlignCenter

	// The buttons wrap and the text narrows with the window (half a small screen is enough).
	body := container.NewVBox(title, intro, newFlow(flowCenter, get, demo, setup, open), demoNote)
	return container.NewVScroll(container.NewVBox(layoutSpacer(), container.NewPadded(capWidth(640, body)), layoutSpacer()))
}

// startDemo makes and loads the demo model, showing the loading screen.
func (a *App) startDemo() {
	if err := a.ctl.LoadDemo(); err != nil {
		a.showError("Starting the demo", err)
		return
	}
	a.Show(ScreenLoading)
}
