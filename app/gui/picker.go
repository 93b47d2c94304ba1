package gui

import (
	"fmt"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/engine"
)

func layoutSpacer() fyne.CanvasObject { return layout.NewSpacer() }

// pickerView is the model picker: Open GGUF…, the recent models and the chosen model's card.
type pickerView struct {
	a    *App
	root fyne.CanvasObject
	card *widget.Label
	load *widget.Button
}

func (a *App) newPickerView() *pickerView {
	v := &pickerView{a: a}
	title := widget.NewLabelWithStyle("Choose a model", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText

	open := widget.NewButtonWithIcon("Open GGUF…", theme.FolderOpenIcon(), v.openFile)
	open.Importance = widget.HighImportance
	get := widget.NewButtonWithIcon("Get a model", theme.DownloadIcon(), func() { a.Show(ScreenLibrary) })
	demo := widget.NewButtonWithIcon("Try the demo", theme.MediaPlayIcon(), a.startDemo)
	settings := widget.NewButtonWithIcon("Settings", theme.SettingsIcon(), a.showSettingsAlone)
	server := widget.NewButtonWithIcon("Connect to a server", theme.ComputerIcon(), a.connectDialog)

	recent := a.ctl.Settings().RecentModels
	var recentList fyne.CanvasObject
	if len(recent) == 0 {
		recentList = secondaryText("No recent models. Open a .gguf file, or try the demo.")
	} else {
		list := widget.NewList(
			func() int { return len(recent) },
			func() fyne.CanvasObject {
				l := widget.NewLabel("model.gguf")
				l.Truncation = fyne.TextTruncateEllipsis
				return l
			},
			func(i widget.ListItemID, o fyne.CanvasObject) {
				o.(*widget.Label).SetText(filepath.Base(recent[i]) + "  —  " + filepath.Dir(recent[i]))
			})
		list.OnSelected = func(i widget.ListItemID) { a.ctl.Inspect(recent[i]) }
		recentList = list
	}

	v.card = widget.NewLabel("Pick a model to see what it is and how Strata will place it.")
	v.card.Wrapping = fyne.TextWrapWord
	v.load = widget.NewButtonWithIcon("Load this model", theme.ConfirmIcon(), v.loadChosen)
	v.load.Importance = widget.HighImportance
	v.load.Disable()

	left := container.NewBorder(
		container.NewVBox(title, newFlow(flowLeading, open, get, demo, server, settings), widget.NewLabelWithStyle("Recent models", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})),
		nil, nil, nil, recentList)
	right := container.NewBorder(widget.NewLabelWithStyle("Model card", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		container.NewHBox(layoutSpacer(), v.load), nil, nil, container.NewVScroll(v.card))
	split := container.NewHSplit(container.NewPadded(left), widget.NewCard("", "", container.NewPadded(right)))
	split.Offset = 0.45
	v.root = split
	v.update()
	return v
}

// openFile asks for a file with the native dialog, off the UI goroutine.
func (v *pickerView) openFile() {
	go func() {
		path, err := v.a.files.OpenGGUF()
		v.a.post(func() {
			switch {
			case err == errPickCancelled:
			case err != nil:
				v.a.showError("Opening the file dialog", err)
			default:
				v.a.ctl.Inspect(path)
				v.update()
			}
		})
	}()
}

func (v *pickerView) loadChosen() {
	path, _, err := v.a.ctl.Card()
	if path == "" || err != nil {
		return
	}
	if err := v.a.ctl.Load(path); err != nil {
		v.a.showError("Loading the model", err)
		return
	}
	v.a.Show(ScreenLoading)
}

// update redraws the card from the controller.
func (v *pickerView) update() {
	path, info, err := v.a.ctl.Card()
	switch {
	case path == "":
		v.load.Disable()
		return
	case err != nil:
		v.card.SetText(filepath.Base(path) + "\n\n" + friendly("Reading the model", err))
		v.card.Importance = widget.DangerImportance
		v.load.Disable()
	case info.Architecture == "" && info.FileBytes == 0:
		v.card.SetText(filepath.Base(path) + "\n\nReading the model's header…")
		v.card.Importance = widget.MediumImportance
		v.load.Disable()
	default:
		v.card.SetText(cardText(info, v.a.ctl.Settings().Config))
		v.card.Importance = widget.MediumImportance
		v.load.Enable()
	}
	v.card.Refresh()
}

// cardText is the model card: what the model is and what the plan does with it.
func cardText(info engine.ModelInfo, cfg engine.Config) string {
	var b strings.Builder
	name := info.Name
	if name == "" {
		name = filepath.Base(info.Path)
	}
	fmt.Fprintf(&b, "%s\n\n", name)
	fmt.Fprintf(&b, "Architecture: %s\n", info.Architecture)
	fmt.Fprintf(&b, "Parameters: %s in all, %s active per token\n", humanCount(info.TotalParams), humanCount(info.ActiveParams))
	fmt.Fprintf(&b, "Experts: %d per layer, %d used per token, %d layers\n", info.Experts, info.ExpertsUsed, info.Layers)
	fmt.Fprintf(&b, "Quantisation: %s\n", info.Quantization)
	fmt.Fprintf(&b, "File size: %s\n", humanBytes(info.FileBytes))
	if info.ContextLength > 0 {
		fmt.Fprintf(&b, "Trained context: %d tokens\n", info.ContextLength)
	}
	b.WriteString("\nWhere it will go (" + modeTitle(modeOf(cfg)) + "):\n")
	b.WriteString(planSummary(info, cfg))
	b.WriteString("\n" + info.Path)
	return b.String()
}

// planSummary says what goes to each tier before loading. The engine's API has no plan
// call without loading (the CLI's `strata plan` has one), so this states the rule the
// planner follows with the model's byte counts; the tier map shows the exact plan once
// the model is loaded.
func planSummary(info engine.ModelInfo, cfg engine.Config) string {
	nonExpert := humanBytes(info.NonExpertBytes)
	experts := humanBytes(info.ExpertBytes)
	if modeOf(cfg) == ModeCPU {
		return fmt.Sprintf("• Everything on the CPU: %s of shared weights and %s of experts read from RAM or the SSD.\n", nonExpert, experts)
	}
	cache := "as many experts as fit"
	if cfg.ExpertCache != engine.Auto {
		cache = fmt.Sprintf("%d expert slots", cfg.ExpertCache)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "• GPU: %s of shared weights (attention, router, embeddings) and the KV cache, then %s of the most-used experts.\n", nonExpert, cache)
	if cfg.ExpertCacheDevice1 > 0 || cfg.ExpertCacheDevice2 > 0 {
		fmt.Fprintf(&b, "• Helper GPUs: %d + %d expert slots.\n", cfg.ExpertCacheDevice1, cfg.ExpertCacheDevice2)
	}
	budget := "available RAM minus " + fmt.Sprintf("%g GiB", cfg.HostReserveGiB)
	if cfg.HostBudgetGiB > 0 {
		budget = fmt.Sprintf("%g GiB", cfg.HostBudgetGiB)
	}
	fmt.Fprintf(&b, "• RAM: the next experts, up to %s.\n", budget)
	fmt.Fprintf(&b, "• SSD: the rest of the %s of experts, read when routed.\n", experts)
	return b.String()
}
