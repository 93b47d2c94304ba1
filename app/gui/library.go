package gui

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/app/library"
	"strata/app/wizard"
	"strata/platform"
)

// libraryView is the "Get a model" screen: the built-in catalogue with this PC's verdict
// for each model, any Hugging Face repository by name or search, the downloads with their
// progress and Pause/Resume/Cancel, and the models in the models folder. The Hub client,
// the downloads and the folder live in app/library; this file only draws them.
type libraryView struct {
	a      *App
	root   fyne.CanvasObject
	client *library.Client

	folder    *widget.Entry
	hwNote    *widget.RichText
	catalogue *fyne.Container
	query     *widget.Entry
	results   *fyne.Container
	downloads *fyne.Container
	local     *fyne.Container

	rows map[*library.Job]*jobRow
}

// jobRow is one download on screen.
type jobRow struct {
	job    *library.Job
	box    *fyne.Container
	bar    *widget.ProgressBar
	status *widget.Label
	pause  *widget.Button
	resume *widget.Button
	cancel *widget.Button
}

// modelsDir is the models folder the settings name (or the default).
func (a *App) modelsDir() string {
	d, err := library.ModelsDir(a.ctl.Settings())
	if err != nil {
		return filepath.Join(a.dataDir, "models")
	}
	return d
}

func (a *App) newLibraryView() *libraryView {
	v := &libraryView{a: a, client: a.hub, rows: map[*library.Job]*jobRow{}}
	title := widget.NewLabelWithStyle("Get a model", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText
	back := widget.NewButtonWithIcon("Back", theme.NavigateBackIcon(), func() {
		if a.ctl.Settings().WizardDone {
			a.Show(ScreenPicker)
		} else {
			a.Show(ScreenWelcome)
		}
	})

	v.folder = widget.NewEntry()
	v.folder.SetText(a.modelsDir())
	useFolder := widget.NewButton("Use this folder", v.setFolder)
	folderRow := container.NewBorder(nil, nil, widget.NewLabel("Models folder"), useFolder, v.folder)

	v.hwNote = secondaryText("Checking this PC…")
	v.catalogue = container.NewVBox()

	v.query = widget.NewEntry()
	v.query.SetPlaceHolder("Search Hugging Face, or owner/name of a GGUF repository")
	v.query.OnSubmitted = func(string) { v.search() }
	searchBtn := widget.NewButtonWithIcon("Search", theme.SearchIcon(), v.search)
	v.results = container.NewVBox()

	v.downloads = container.NewVBox()
	v.local = container.NewVBox()

	body := container.NewVBox(
		folderRow,
		section("Suggested for this PC"), v.hwNote, v.catalogue,
		section("Any Hugging Face repository"), container.NewBorder(nil, nil, nil, searchBtn, v.query), v.results,
		section("Downloads"), v.downloads,
		section("Downloaded models"), v.local,
	)
	v.root = container.NewBorder(container.NewHBox(back, title), nil, nil, nil, container.NewVScroll(container.NewPadded(body)))

	for _, j := range a.jobs {
		v.addRow(j)
	}
	v.fillCatalogue(nil)
	v.refreshLocal()
	v.updateDownloadsNote()
	go func() {
		hw := a.hardware(context.Background())
		a.post(func() { v.fillCatalogue(&hw) })
	}()
	return v
}

func section(title string) fyne.CanvasObject {
	return widget.NewLabelWithStyle(title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
}

// setFolder saves the models folder the entry names.
func (v *libraryView) setFolder() {
	dir := strings.TrimSpace(v.folder.Text)
	if dir == "" || !filepath.IsAbs(dir) {
		v.a.showMessage("Models folder", "Give the full path of a folder (it is created when needed).")
		return
	}
	s := v.a.ctl.Settings()
	s.ModelsDir = dir
	if err := v.a.ctl.saveSettings(s); err != nil {
		v.a.showError("Saving the models folder", err)
		return
	}
	v.refreshLocal()
}

// fillCatalogue draws the catalogue; hw nil: the verdicts are still being worked out.
func (v *libraryView) fillCatalogue(hw *wizard.Hardware) {
	entries, err := library.Catalogue()
	if err != nil {
		setSecondaryText(v.hwNote, err.Error())
		return
	}
	if hw != nil {
		setSecondaryText(v.hwNote, fmt.Sprintf("Verdicts for this PC: %s of RAM, %s. Speeds are rough classes; the tier map shows the real numbers once a model runs.",
			humanBytes(hw.RAMTotal), gpuWords(*hw)))
	}
	v.catalogue.RemoveAll()
	for _, e := range entries {
		verdict := "…"
		if hw != nil {
			j := library.Judge(*hw, e)
			verdict = j.Words
			if !j.TooBig {
				verdict += ", " + j.Speed
			}
			if !j.Supported {
				verdict = "Not supported yet: " + j.Reason
			}
		}
		head := widget.NewLabelWithStyle(fmt.Sprintf("%s  ·  about %s  ·  %s", e.Name, library.HumanBytes(e.Bytes), verdict), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		head.Wrapping = fyne.TextWrapWord
		about := widget.NewLabel(e.GoodAt + "\n" + e.Ref())
		about.Wrapping = fyne.TextWrapWord
		e := e
		get := widget.NewButtonWithIcon("Download", theme.DownloadIcon(), func() { v.startRef(e.Repo, e.Quant) })
		v.catalogue.Add(container.NewBorder(nil, nil, nil, container.NewVBox(get), container.NewVBox(head, about)))
	}
	v.catalogue.Refresh()
}

func gpuWords(hw wizard.Hardware) string {
	if len(hw.GPUs) == 0 {
		return "no NVIDIA card"
	}
	return fmt.Sprintf("%s with %s", hw.GPUs[0].Name, humanBytes(hw.GPUs[0].VRAMTotal))
}

// search looks the query up on the Hub: owner/name lists that repository's models, other
// text searches GGUF repositories.
func (v *libraryView) search() {
	q := strings.TrimSpace(v.query.Text)
	if q == "" {
		return
	}
	v.results.RemoveAll()
	v.results.Add(widget.NewLabel("Asking Hugging Face…"))
	go func() {
		if library.ValidRepo(q) == nil {
			v.listRepo(q)
			return
		}
		repos, err := v.client.Search(context.Background(), q, 20)
		v.a.post(func() {
			v.results.RemoveAll()
			switch {
			case err != nil:
				v.results.Add(errorLabel(err))
			case len(repos) == 0:
				v.results.Add(widget.NewLabel("No GGUF repository matches “" + q + "”."))
			}
			for _, r := range repos {
				r := r
				label := fmt.Sprintf("%s  (%d downloads)", r.ID, r.Downloads)
				if r.Gated {
					label += "  · gated: needs HF_TOKEN"
				}
				v.results.Add(widget.NewButton(label, func() { go v.listRepo(r.ID) }))
			}
			v.results.Refresh()
		})
	}()
}

// listRepo shows a repository's GGUF models with a Download button each (off the UI
// goroutine).
func (v *libraryView) listRepo(repo string) {
	files, err := v.client.Files(context.Background(), repo)
	v.a.post(func() {
		v.results.RemoveAll()
		if err != nil {
			v.results.Add(errorLabel(err))
			v.results.Refresh()
			return
		}
		models := library.GGUFModels(files)
		if len(models) == 0 {
			v.results.Add(widget.NewLabel(repo + " has no GGUF model file."))
		}
		v.results.Add(widget.NewLabelWithStyle(repo, fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
		for _, m := range models {
			m := m
			text := fmt.Sprintf("%s  ·  %s", m.Name, library.HumanBytes(m.Size()))
			if len(m.Parts) > 1 {
				text += fmt.Sprintf(" in %d parts", len(m.Parts))
			}
			get := widget.NewButtonWithIcon("Download", theme.DownloadIcon(), func() { v.start(repo, m) })
			v.results.Add(container.NewBorder(nil, nil, nil, get, widget.NewLabel(text)))
		}
		v.results.Refresh()
	})
}

func errorLabel(err error) *widget.Label {
	l := widget.NewLabel(err.Error())
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.DangerImportance
	return l
}

// startRef resolves REPO:QUANT against the repository's files, then downloads it.
func (v *libraryView) startRef(repo, quant string) {
	go func() {
		files, err := v.client.Files(context.Background(), repo)
		var m library.GGUFModel
		if err == nil {
			m, err = library.Choose(repo, library.GGUFModels(files), quant)
		}
		v.a.post(func() {
			if err != nil {
				v.a.showError("Getting "+repo, err)
				return
			}
			v.start(repo, m)
		})
	}()
}

// start adds a download job and runs it.
func (v *libraryView) start(repo string, m library.GGUFModel) {
	dir := v.a.modelsDir()
	for i, j := range v.a.jobs {
		if j.Repo != repo || j.Model.Name != m.Name || j.Dir != dir {
			continue
		}
		switch j.Status().State {
		case library.JobPaused, library.JobFailed:
			j.Resume()
			return
		case library.JobRunning:
			return
		}
		// Done or cancelled: a new download replaces the old row.
		if r := v.rows[j]; r != nil {
			v.downloads.Remove(r.box)
			delete(v.rows, j)
		}
		v.a.jobs = append(v.a.jobs[:i:i], v.a.jobs[i+1:]...)
		break
	}
	j := library.NewJob(v.client, repo, m, dir)
	v.a.jobs = append(v.a.jobs, j)
	v.addRow(j)
	j.Resume()
}

// addRow draws a job and keeps it up to date.
func (v *libraryView) addRow(j *library.Job) {
	r := &jobRow{job: j, bar: widget.NewProgressBar(), status: widget.NewLabel("")}
	r.pause = widget.NewButtonWithIcon("Pause", theme.MediaPauseIcon(), func() { go j.Pause() })
	r.resume = widget.NewButtonWithIcon("Resume", theme.MediaPlayIcon(), j.Resume)
	r.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), func() {
		go func() {
			if err := j.Cancel(); err != nil {
				v.a.post(func() { v.a.showError("Cancelling the download", err) })
			}
		}()
	})
	if len(v.rows) == 0 {
		v.downloads.RemoveAll() // the "Nothing downloading" note
	}
	name := widget.NewLabelWithStyle(j.Model.Name+"  ·  "+j.Repo, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	name.Wrapping = fyne.TextWrapWord
	r.box = container.NewVBox(name, r.bar, container.NewBorder(nil, nil, nil, container.NewHBox(r.pause, r.resume, r.cancel), r.status))
	v.rows[j] = r
	v.downloads.Add(r.box)
	j.SetOnUpdate(func(library.JobStatus) { v.a.post(func() { v.updateRow(r) }) })
	v.updateRow(r)
	v.updateDownloadsNote()
}

// updateRow redraws a job from its status.
func (v *libraryView) updateRow(r *jobRow) {
	st := r.job.Status()
	p := st.Progress
	r.bar.SetValue(p.Fraction())
	text := fmt.Sprintf("%s of %s", library.HumanBytes(p.Done), library.HumanBytes(p.Total))
	switch st.State {
	case library.JobRunning:
		if p.BytesPerSec > 0 {
			text += fmt.Sprintf("  ·  %s/s", library.HumanBytes(int64(p.BytesPerSec)))
		}
		if p.Left > 0 {
			text += "  ·  " + p.Left.Round(time.Second).String() + " left"
		}
	case library.JobPaused:
		text = "Paused at " + text
	case library.JobDone:
		text = "Downloaded and checked: " + st.Path
	case library.JobCancelled:
		text = "Cancelled; the partial files were deleted"
	case library.JobFailed:
		text = "Stopped: " + st.Err.Error()
	}
	r.status.SetText(text)
	r.status.Wrapping = fyne.TextWrapWord
	r.pause.Hidden = st.State != library.JobRunning
	r.resume.Hidden = st.State != library.JobPaused && st.State != library.JobFailed
	r.cancel.Hidden = st.State == library.JobDone || st.State == library.JobCancelled
	r.box.Refresh()
	if st.State == library.JobDone {
		v.refreshLocal()
	}
}

func (v *libraryView) updateDownloadsNote() {
	if len(v.rows) > 0 {
		return
	}
	if len(v.downloads.Objects) == 0 {
		v.downloads.Add(secondaryText("Nothing downloading."))
	}
}

// refreshLocal lists the models folder (off the UI goroutine: it reads headers).
func (v *libraryView) refreshLocal() {
	dir := v.a.modelsDir()
	used := v.a.ctl.Settings().LastUsed
	go func() {
		models, err := library.LocalModels(context.Background(), dir, func(p string) time.Time { return used[p] })
		v.a.post(func() { v.drawLocal(dir, models, err) })
	}()
}

func (v *libraryView) drawLocal(dir string, models []library.LocalModel, err error) {
	v.local.RemoveAll()
	switch {
	case err != nil:
		v.local.Add(errorLabel(err))
	case len(models) == 0:
		v.local.Add(secondaryText("No models in " + dir + " yet."))
	}
	for _, m := range models {
		m := m
		arch := m.Architecture
		if arch == "" {
			arch = "unreadable"
		}
		last := "never used"
		if !m.LastUsed.IsZero() {
			last = "last used " + m.LastUsed.Local().Format("2 Jan 2006 15:04")
		}
		parts := ""
		if len(m.Parts) > 1 {
			parts = fmt.Sprintf(" in %d parts", len(m.Parts))
		}
		text := fmt.Sprintf("%s  ·  %s%s  ·  %s  ·  %s", m.Name(), library.HumanBytes(m.Size), parts, arch, last)
		open := widget.NewButtonWithIcon("Open", theme.FolderOpenIcon(), func() {
			v.a.ctl.Inspect(m.Path)
			v.a.Show(ScreenPicker)
		})
		reveal := widget.NewButtonWithIcon("Show in folder", theme.FolderIcon(), func() {
			if err := v.a.reveal(m.Path); err != nil {
				v.a.showError("Showing the file", err)
			}
		})
		del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), func() { v.confirmDelete(m) })
		// The words wrap and the buttons go under them, so a long name never widens the window.
		about := widget.NewLabel(text)
		about.Wrapping = fyne.TextWrapWord
		v.local.Add(container.NewVBox(about, newFlow(flowLeading, open, reveal, del)))
	}
	v.local.Refresh()
}

// confirmDelete asks before deleting a model's files.
func (v *libraryView) confirmDelete(m library.LocalModel) {
	msg := fmt.Sprintf("Delete %s (%s) from the disk? This cannot be undone.", m.Name(), library.HumanBytes(m.Size))
	d := dialog.NewConfirm("Delete model", msg, func(ok bool) {
		if !ok {
			return
		}
		if err := m.Delete(); err != nil {
			v.a.showError("Deleting the model", err)
		}
		v.refreshLocal()
	}, v.a.win)
	d.SetConfirmText("Delete")
	d.SetDismissText("Keep")
	d.Show()
}

// probeHardware is this PC as the wizard sees it, for the catalogue's verdicts.
func probeHardware(ctx context.Context) wizard.Hardware {
	return wizard.HardwareFromHost(platform.Probe(ctx), nil)
}
