package gui

import (
	"context"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/app/wizard"
)

// wizardScreen shows the machine in plain words and the recommended mode with its reason;
// the person accepts it or opens the settings. The advice is read in the background.
func (a *App) wizardScreen() fyne.CanvasObject {
	title := widget.NewLabelWithStyle("Your PC", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText
	machine := widget.NewLabel("Looking at this PC…")
	machine.Wrapping = fyne.TextWrapWord
	mode := widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	reason := widget.NewLabel("")
	reason.Wrapping = fyne.TextWrapWord
	warnings := widget.NewLabel("")
	warnings.Wrapping = fyne.TextWrapWord
	warnings.Importance = widget.WarningImportance
	warnings.Hide()

	var advice *Advice
	accept := widget.NewButtonWithIcon("Use this", theme.ConfirmIcon(), func() {
		if advice == nil {
			return
		}
		if err := a.ctl.AcceptAdvice(*advice); err != nil {
			a.showError("Saving the settings", err)
			return
		}
		a.Show(ScreenPicker)
	})
	accept.Importance = widget.HighImportance
	accept.Disable()
	settings := widget.NewButtonWithIcon("Open settings", theme.SettingsIcon(), func() { a.showSettingsAlone() })
	back := widget.NewButtonWithIcon("Back", theme.NavigateBackIcon(), func() { a.Show(ScreenWelcome) })

	go func() {
		_, info, _ := a.ctl.Card()
		adv, err := a.advise(context.Background(), info)
		a.post(func() {
			if err != nil {
				machine.SetText(friendly("Looking at this PC", err))
				return
			}
			advice = &adv
			machine.SetText(strings.Join(adv.Machine, "\n"))
			mode.SetText("Recommended: " + modeTitle(adv.Mode))
			reason.SetText(adv.Reason)
			if len(adv.Warnings) > 0 {
				warnings.SetText(strings.Join(adv.Warnings, "\n"))
				warnings.Show()
			}
			accept.Enable()
		})
	}()

	body := container.NewVBox(title, machine, widget.NewSeparator(), mode, reason, warnings,
		newFlow(flowSpread, back, container.NewHBox(settings, accept)))
	return container.NewVScroll(container.NewVBox(layoutSpacer(), container.NewPadded(capWidth(640, body)), layoutSpacer()))
}

// modeTitle names a mode for people.
func modeTitle(mode string) string {
	switch mode {
	case ModeAuto:
		return "Automatic (GPU expert cache when there is a GPU)"
	case ModeTiered:
		return "Tiered: VRAM, then RAM, then SSD"
	case ModeResident:
		return "Resident: VRAM cache plus the rest in RAM"
	case ModeCPU, string(wizard.ModeCPUOnly):
		return "CPU only"
	case string(wizard.ModeAllGPU):
		return "Everything on the GPU"
	case "default-arena": // the wizard's mode for experts that all fit in RAM until 2026-12-02, in older settings
		return "GPU expert cache; the other experts are read from RAM"
	}
	return mode
}
