package gui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"strata/app/library"
	"strata/app/library/hubtest"
	"strata/app/wizard"
	"strata/platform"
)

// buttonIn finds the visible button with this label under o (call it on the UI loop).
func buttonIn(o fyne.CanvasObject, label string) *widget.Button {
	var found *widget.Button
	objects(o, func(x fyne.CanvasObject) {
		if b, ok := x.(*widget.Button); ok && b.Text == label && b.Visible() && found == nil {
			found = b
		}
	})
	return found
}

// TestLibraryScreen drives "Get a model" against a stand-in Hub: the welcome page leads
// with it, the catalogue shows this PC's verdicts, a search finds a repository, its split
// model downloads with Pause and Resume, then opens, shows in the folder and is deleted
// after a confirmation; a second download is cancelled.
func TestLibraryScreen(t *testing.T) {
	test.NewTempApp(t)
	files := hubtest.SplitModel(t)
	hub, srv := hubtest.New(t, map[string]map[string][]byte{"strata/tiny-GGUF": files})
	client := &library.Client{Endpoint: srv.URL, ReportEvery: time.Nanosecond,
		FreeSpace: func(string) (int64, error) { return 1 << 40, nil }}
	var part0 int64
	for name, b := range files {
		if strings.HasSuffix(name, "-00001-of-00003.gguf") {
			part0 = int64(len(b))
		}
	}
	var revealMu sync.Mutex
	var revealed []string
	dir := t.TempDir()
	opts := Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"), Files: filesFrom(""), Advise: testAdvice,
		Hub: client,
		Hardware: func(context.Context) wizard.Hardware {
			return wizard.Hardware{RAMTotal: 32 << 30, RAMAvailable: 28 << 30, PhysicalCores: 8, Drive: platform.DriveNVMe, DriveMBps: 3500,
				GPUs: []wizard.GPU{{Index: 0, Name: "RTX 4080", VRAMTotal: 16 << 30, VRAMFree: 15 << 30, Display: true}}}
		},
		Reveal: func(p string) error { revealMu.Lock(); revealed = append(revealed, p); revealMu.Unlock(); return nil },
	}
	a, g := newTestApp(t, opts)
	w := a.Window()
	g.ui.do(a.Start)

	// The welcome page leads with "Get a model", the demo second.
	var first, second string
	g.ui.do(func() {
		var labels []string
		objects(w.Canvas().Content(), func(o fyne.CanvasObject) {
			if b, ok := o.(*widget.Button); ok {
				labels = append(labels, b.Text)
			}
		})
		if len(labels) >= 2 {
			first, second = labels[0], labels[1]
		}
	})
	if first != "Get a model" || second != "Try the demo" {
		t.Fatalf("welcome buttons start %q, %q", first, second)
	}
	g.tap(w, "Get a model")
	if a.screen != ScreenLibrary {
		t.Fatalf("screen %q", a.screen)
	}
	g.until("the verdicts", func() bool {
		txt := windowText(w)
		return strings.Contains(txt, "gpt-oss 20B") && strings.Contains(txt, "Tiered: GPU and RAM, fast") && strings.Contains(txt, "Tiered: GPU, RAM and SSD")
	})
	if txt := g.text(w); !strings.Contains(txt, "Not supported yet") || !strings.Contains(txt, "RTX 4080") {
		t.Errorf("catalogue:\n%s", txt)
	}

	// The models folder.
	models := filepath.Join(dir, "models")
	g.ui.do(func() { a.library.folder.SetText(models) })
	g.tap(w, "Use this folder")
	if got := a.ctl.Settings().ModelsDir; got != models {
		t.Fatalf("models folder %q", got)
	}

	// Search, list the repository, download with a pause in the first part.
	hub.SetHolds(part0 / 2)
	g.ui.do(func() { test.Type(a.library.query, "tiny") })
	g.tap(w, "Search")
	g.until("the search result", func() bool { return buttonIn(a.library.results, "strata/tiny-GGUF  (7 downloads)") != nil })
	g.ui.do(func() { test.Tap(buttonIn(a.library.results, "strata/tiny-GGUF  (7 downloads)")) })
	g.until("the repository's model", func() bool { return buttonIn(a.library.results, "Download") != nil })
	if txt := g.text(w); !strings.Contains(txt, "tiny-Q8_0-00001-of-00003.gguf") || !strings.Contains(txt, "in 3 parts") {
		t.Fatalf("repository listing:\n%s", txt)
	}
	g.ui.do(func() { test.Tap(buttonIn(a.library.results, "Download")) })
	var job *library.Job
	g.until("the download to reach the hold", func() bool {
		if len(a.jobs) == 0 {
			return false
		}
		job = a.jobs[0]
		return job.Status().Progress.Done == part0/2
	})
	g.until("the Pause button", func() bool { b := button(w, "Pause"); return b != nil })
	g.tap(w, "Pause")
	g.until("the paused row", func() bool { return strings.Contains(windowText(w), "Paused at") && button(w, "Resume") != nil })
	if st := job.Status(); st.State != library.JobPaused {
		t.Fatalf("after Pause: %+v", st)
	}
	g.tap(w, "Resume")
	g.until("the finished download", func() bool { return strings.Contains(windowText(w), "Downloaded and checked") })
	if r := hub.Ranges(); len(r) < 2 || r[1] == "" {
		t.Errorf("the resumed download asked for %q", r)
	}
	g.until("the downloaded model in the list", func() bool {
		txt := windowText(w)
		return strings.Contains(txt, "tiny-Q8_0-00001-of-00003.gguf  ·") && strings.Contains(txt, "in 3 parts  ·  qwen3moe  ·  never used")
	})

	// Show in folder, then Open: the picker's card.
	g.ui.do(func() { test.Tap(buttonIn(a.library.local, "Show in folder")) })
	firstPart := filepath.Join(models, "tiny-Q8_0-00001-of-00003.gguf")
	revealMu.Lock()
	if len(revealed) != 1 || revealed[0] != firstPart {
		t.Errorf("revealed %q", revealed)
	}
	revealMu.Unlock()
	g.ui.do(func() { test.Tap(buttonIn(a.library.local, "Open")) })
	waitFor(t, "the card", func() bool { _, info, err := a.ctl.Card(); return err != nil || info.Architecture != "" })
	if path, info, err := a.ctl.Card(); err != nil || path != firstPart || info.Architecture != "qwen3moe" || a.screen != ScreenPicker {
		t.Fatalf("open: %s %+v %v on %q", path, info, err, a.screen)
	}

	// The picker (a file dialog, "Open with Strata") given the second part takes the set.
	g.ui.do(func() { a.ctl.Inspect(filepath.Join(models, "tiny-Q8_0-00002-of-00003.gguf")) })
	waitFor(t, "the card of the set", func() bool { _, info, err := a.ctl.Card(); return err != nil || info.Architecture != "" })
	if path, info, err := a.ctl.Card(); err != nil || path != firstPart || info.FileBytes <= part0 {
		t.Fatalf("second part picked: %s %+v %v", path, info, err)
	}

	// Back in the library: delete, after the confirmation.
	g.ui.do(func() { a.Show(ScreenLibrary) })
	g.until("the model in the list", func() bool { return buttonIn(a.library.local, "Delete") != nil })
	g.ui.do(func() { test.Tap(buttonIn(a.library.local, "Delete")) })
	var confirmed bool
	g.until("the confirmation", func() bool {
		top := w.Canvas().Overlays().Top()
		if top == nil || !strings.Contains(windowTextOf(top), "cannot be undone") {
			return false
		}
		if b := buttonIn(top, "Delete"); b != nil {
			test.Tap(b)
			confirmed = true
		}
		return confirmed
	})
	g.until("the empty folder", func() bool { return strings.Contains(windowText(w), "No models in "+models) })
	for name := range files {
		if _, err := os.Stat(filepath.Join(models, name)); err == nil {
			t.Errorf("%s is still there", name)
		}
	}

	// A second download, cancelled in the middle: its files go.
	hub.SetHolds(part0 / 3)
	g.ui.do(func() { a.library.start("strata/tiny-GGUF", job.Model) })
	g.until("the second download running", func() bool {
		if len(a.jobs) != 1 || a.jobs[0] == job {
			return false
		}
		st := a.jobs[0].Status()
		return st.State == library.JobRunning && st.Progress.Done == part0/3
	})
	g.tap(w, "Cancel")
	g.until("the cancelled row", func() bool { return strings.Contains(windowText(w), "Cancelled; the partial files were deleted") })
	if entries, _ := os.ReadDir(models); len(entries) != 0 {
		t.Errorf("left after cancel: %v", entries)
	}
}

// windowTextOf is the label text under o.
func windowTextOf(o fyne.CanvasObject) string {
	var b strings.Builder
	objects(o, func(x fyne.CanvasObject) {
		if l, ok := x.(*widget.Label); ok {
			b.WriteString(l.Text + "\n")
		}
	})
	return b.String()
}
