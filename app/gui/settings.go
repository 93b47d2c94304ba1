package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/engine"
)

// settingsView is the settings panel: every engine knob a person may want, validated on
// save, stored in settings.json and applied by reloading the model.
type settingsView struct {
	a      *App
	root   fyne.CanvasObject
	status *widget.Label
	save   *widget.Button

	mode                       *widget.Select
	expertCache                *widget.Entry
	helper1, helper2           *widget.Check
	helper1Slots, helper2Slots *widget.Entry
	vramReserve, vramBudget    *widget.Entry
	hostReserve, hostBudget    *widget.Entry
	maxContext                 *widget.Entry
	kvType                     *widget.Select
	threads, spec, adaptEvery  *widget.Entry
	adaptive                   *widget.Check
	contextFull                *widget.Select
	server                     *serverPanel
}

// contextFullChoices are the settings panel's words for the engine's context policies.
var contextFullChoices = []struct {
	label  string
	policy engine.ContextPolicy
}{
	{"Stop and say so", engine.ContextStop},
	{"Drop the oldest turns (keep the system prompt)", engine.ContextDropOldest},
}

func (a *App) newSettingsView() *settingsView {
	v := &settingsView{a: a}
	v.mode = widget.NewSelect(modeNames(), nil)
	v.expertCache = widget.NewEntry()
	v.helper1 = widget.NewCheck("use", nil)
	v.helper1Slots = widget.NewEntry()
	v.helper2 = widget.NewCheck("use", nil)
	v.helper2Slots = widget.NewEntry()
	v.vramReserve = widget.NewEntry()
	v.vramBudget = widget.NewEntry()
	v.hostReserve = widget.NewEntry()
	v.hostBudget = widget.NewEntry()
	v.maxContext = widget.NewEntry()
	v.kvType = widget.NewSelect([]string{"f16", "int8"}, nil)
	v.threads = widget.NewEntry()
	v.spec = widget.NewEntry()
	v.adaptive = widget.NewCheck("on", nil)
	v.adaptEvery = widget.NewEntry()
	var labels []string
	for _, c := range contextFullChoices {
		labels = append(labels, c.label)
	}
	v.contextFull = widget.NewSelect(labels, nil)
	v.contextFull.SetSelectedIndex(policyIndex(a.ctl.Settings().ContextFull))
	v.contextFull.OnChanged = func(string) {
		if err := a.ctl.SetContextPolicy(contextFullChoices[v.contextFull.SelectedIndex()].policy); err != nil {
			v.status.SetText(friendly("Saving the setting", err))
		}
	}

	// Each setting's hint wraps under it (a form's own hint text does not wrap, and the
	// longest set the window's minimum width).
	item := func(label string, obj fyne.CanvasObject, text string) *widget.FormItem {
		hint := secondaryText(text)
		hint.Segments[0].(*widget.TextSegment).Style.SizeName = theme.SizeNameCaptionText
		// Pulled up under its box, as a form's own hint sits.
		tight := container.New(layout.NewCustomPaddedLayout(-2*theme.Padding(), -theme.Padding(), 0, 0), hint)
		return widget.NewFormItem(label, container.NewVBox(obj, tight))
	}
	form := widget.NewForm(
		item("Mode", v.mode, "auto: GPU cache when there is a GPU · tiered: VRAM, RAM, SSD · resident: VRAM + RAM arena · cpu: no GPU"),
		item("GPU expert slots", v.expertCache, "auto, or a number of experts to keep in VRAM"),
		item("Helper GPU 1", container.NewBorder(nil, nil, v.helper1, nil, v.helper1Slots), "expert slots on a second card"),
		item("Helper GPU 2", container.NewBorder(nil, nil, v.helper2, nil, v.helper2Slots), "expert slots on a third card"),
		item("VRAM reserve (MiB)", v.vramReserve, "left free for the desktop and other apps"),
		item("VRAM budget (MiB)", v.vramBudget, "cap on what Strata takes of a card; 0 = no cap"),
		item("RAM reserve (GiB)", v.hostReserve, "kept free for the rest of the PC"),
		item("RAM budget (GiB)", v.hostBudget, "pinned RAM for experts; 0 = automatic"),
		item("Context length", v.maxContext, "tokens of conversation memory; 0 = the model's, capped by memory"),
		item("KV cache type", v.kvType, "int8 nearly halves the memory of long chats"),
		item("Threads", v.threads, "CPU threads; 0 = one per logical CPU"),
		item("Speculative tokens", v.spec, "tokens drafted per step; 0 = off"),
		item("Adaptive swaps", container.NewBorder(nil, nil, v.adaptive, nil, v.adaptEvery), "re-balance the GPU cache every N tokens (auto: 32)"),
		item("When a chat is full", v.contextFull, "what happens when a chat reaches the context length; applies at once"),
	)
	v.server = a.newServerPanel()
	v.status = widget.NewLabel("")
	v.status.Wrapping = fyne.TextWrapWord
	v.save = widget.NewButtonWithIcon("Save and apply", theme.DocumentSaveIcon(), v.apply)
	v.save.Importance = widget.HighImportance
	revert := widget.NewButtonWithIcon("Defaults", theme.HistoryIcon(), v.defaults)
	bottom := container.NewVBox(v.status, container.NewHBox(layoutSpacer(), revert, v.save))
	v.root = container.NewBorder(nil, bottom, nil, nil, container.NewVScroll(container.NewVBox(form, v.server.root)))
	v.reset()
	return v
}

// policyIndex is the choice that shows a saved policy ("" and unknown values: stop).
func policyIndex(saved string) int {
	for i, c := range contextFullChoices {
		if string(c.policy) == saved {
			return i
		}
	}
	return 0
}

// form reads the widgets.
func (v *settingsView) form() settingsForm {
	return settingsForm{
		Mode: v.mode.Selected, ExpertCache: v.expertCache.Text,
		Helper1: v.helper1.Checked, Helper1Slots: v.helper1Slots.Text,
		Helper2: v.helper2.Checked, Helper2Slots: v.helper2Slots.Text,
		VRAMReserveMiB: v.vramReserve.Text, VRAMBudgetMiB: v.vramBudget.Text,
		HostReserveGiB: v.hostReserve.Text, HostBudgetGiB: v.hostBudget.Text,
		MaxContext: v.maxContext.Text, KVType: v.kvType.Selected, Threads: v.threads.Text,
		Spec: v.spec.Text, AdaptiveSwaps: v.adaptive.Checked, AdaptEvery: v.adaptEvery.Text,
	}
}

// setForm fills the widgets.
func (v *settingsView) setForm(f settingsForm) {
	v.mode.SetSelected(f.Mode)
	v.expertCache.SetText(f.ExpertCache)
	v.helper1.SetChecked(f.Helper1)
	v.helper1Slots.SetText(f.Helper1Slots)
	v.helper2.SetChecked(f.Helper2)
	v.helper2Slots.SetText(f.Helper2Slots)
	v.vramReserve.SetText(f.VRAMReserveMiB)
	v.vramBudget.SetText(f.VRAMBudgetMiB)
	v.hostReserve.SetText(f.HostReserveGiB)
	v.hostBudget.SetText(f.HostBudgetGiB)
	v.maxContext.SetText(f.MaxContext)
	v.kvType.SetSelected(f.KVType)
	v.threads.SetText(f.Threads)
	v.spec.SetText(f.Spec)
	v.adaptive.SetChecked(f.AdaptiveSwaps)
	v.adaptEvery.SetText(f.AdaptEvery)
}

// reset shows the saved settings.
func (v *settingsView) reset() {
	v.setForm(formOf(v.a.ctl.Settings().Config))
	v.status.SetText("")
	v.server.update()
}

// defaults fills the panel with the defaults (not saved until Save).
func (v *settingsView) defaults() {
	v.setForm(formOf(defaultConfig()))
	v.status.SetText("Defaults filled in; press Save and apply to keep them.")
}

// apply validates, saves and reloads; problems are listed in plain words.
func (v *settingsView) apply() {
	reloading, err := v.a.ctl.ApplySettings(v.form())
	switch {
	case err != nil:
		v.status.SetText("Not saved. Please correct:\n" + err.Error())
		v.status.Importance = widget.DangerImportance
	case reloading:
		v.status.SetText("Saved. Reloading the model with the new settings…")
		v.status.Importance = widget.MediumImportance
		v.a.Show(ScreenLoading)
	default:
		v.status.SetText("Saved. They apply to the next model you load.")
		v.status.Importance = widget.SuccessImportance
	}
	v.status.Refresh()
}

// loadChanged is told when loading ends, to say how a reload went.
func (v *settingsView) loadChanged(st LoadState) {
	if !st.Loading && st.Err == nil && st.Loaded {
		v.status.SetText("Applied. " + readyText(st.Ready) + ".")
	}
}

// showSettingsAlone shows the settings panel before any model is loaded (from the wizard,
// the picker or a failed load), with a way back.
func (a *App) showSettingsAlone() {
	// A view of its own: the tabs' settings view may be on screen elsewhere.
	v := a.newSettingsView()
	a.screen = ScreenSettings
	back := widget.NewButtonWithIcon("Back to models", theme.NavigateBackIcon(), func() { a.Show(ScreenPicker) })
	title := widget.NewLabelWithStyle("Settings", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText
	a.win.SetContent(container.NewBorder(container.NewHBox(back, title), nil, nil, nil, v.root))
}
