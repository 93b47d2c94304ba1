package gui

import (
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// loadingView shows Open's progress by phase, with its speed, and can cancel it.
type loadingView struct {
	a        *App
	root     fyne.CanvasObject
	phase    *widget.Label
	bar      *widget.ProgressBar
	wait     *widget.ProgressBarInfinite
	detail   *widget.Label
	history  *widget.Label
	errText  *widget.Label
	cancel   *widget.Button
	back     *widget.Button
	settings *widget.Button
}

func (a *App) newLoadingView() *loadingView {
	v := &loadingView{a: a}
	title := widget.NewLabelWithStyle("Loading the model", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText
	v.phase = widget.NewLabel(phaseLabel(""))
	v.bar = widget.NewProgressBar()
	v.wait = widget.NewProgressBarInfinite()
	v.wait.Hide()
	v.detail = widget.NewLabel("")
	v.history = widget.NewLabel("")
	v.errText = widget.NewLabel("")
	v.errText.Wrapping = fyne.TextWrapWord
	v.errText.Importance = widget.DangerImportance
	v.errText.Hide()
	v.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), a.ctl.CancelLoad)
	v.back = widget.NewButtonWithIcon("Choose another model", theme.NavigateBackIcon(), func() { a.Show(ScreenPicker) })
	v.back.Hide()
	v.settings = widget.NewButtonWithIcon("Open settings", theme.SettingsIcon(), a.showSettingsAlone)
	v.settings.Hide()
	body := container.NewVBox(title, v.phase, container.NewStack(v.bar, v.wait), v.detail, v.history, v.errText,
		newFlow(flowSpread, layoutSpacer(), container.NewHBox(v.back, v.settings, v.cancel)))
	v.root = container.NewVScroll(container.NewVBox(layoutSpacer(), container.NewPadded(capWidth(600, body)), layoutSpacer()))
	return v
}

// update redraws from the controller's state; a finished load moves on to the chat.
func (v *loadingView) update(st LoadState) {
	v.history.SetText(phaseHistory(st.Progress.Finished))
	switch {
	case st.Loading:
		v.phase.SetText(phaseLabel(st.Progress.Phase))
		if st.Progress.Fraction < 0 {
			v.bar.Hide()
			v.wait.Show()
		} else {
			v.wait.Hide()
			v.bar.Show()
			v.bar.SetValue(st.Progress.Fraction)
		}
		v.detail.SetText(progressDetail(st.Progress))
		v.errText.Hide()
		v.cancel.Show()
		v.back.Hide()
		v.settings.Hide()
	case st.Err != nil:
		v.wait.Hide()
		v.phase.SetText("The model did not load")
		v.errText.SetText(friendly("Loading the model", st.Err))
		v.errText.Show()
		v.detail.SetText("")
		v.cancel.Hide()
		v.back.Show()
		v.settings.Show()
	case st.Loaded && v.a.holdLoading:
		// Screenshot mode: stay on the finished load instead of moving on.
		v.wait.Hide()
		v.bar.Show()
		v.bar.SetValue(1)
		v.phase.SetText(fmt.Sprintf("Loaded %s. %s.", st.Info.Name, readyText(st.Ready)))
		v.detail.SetText(progressDetail(st.Progress))
		v.cancel.Hide()
	case st.Loaded:
		v.a.Show(ScreenChat)
	}
}

// progressDetail is the line under the bar: bytes done and speed.
func progressDetail(p loadProgress) string {
	if p.Phase == "ready" {
		return "" // its count is a step, not bytes
	}
	if p.Total <= 0 {
		if p.Done > 0 {
			return humanBytes(p.Done)
		}
		return ""
	}
	s := fmt.Sprintf("%s of %s", humanBytes(p.Done), humanBytes(p.Total))
	if p.MBps > 0 {
		s += fmt.Sprintf(" · %.0f MB/s", p.MBps)
	}
	return s
}

// phaseHistory lists the finished phases with their time and speed.
func phaseHistory(done []phaseDone) string {
	var b strings.Builder
	for _, p := range done {
		fmt.Fprintf(&b, "✓ %s: %s", phaseLabel(p.Phase), duration(p.Took))
		if p.MBps > 0 {
			fmt.Fprintf(&b, ", %.0f MB/s", p.MBps)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// readyText says how long loading took.
func readyText(d time.Duration) string {
	return "Ready in " + duration(d)
}

// duration writes a short time the way a person reads it: milliseconds under a tenth of a
// second (a model that was already mapped loads in a few), else seconds.
func duration(d time.Duration) string {
	if d < 100*time.Millisecond {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
