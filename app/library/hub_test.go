package library

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strata/app/library/hubtest"
	"strata/engine/gguf"
)

// setup serves a tiny synthetic model split in three as repo "strata/tiny-GGUF" (and a
// gated copy) and returns a client of the server (through HF_ENDPOINT) and the files.
func setup(t *testing.T) (*hubtest.Hub, *Client, map[string][]byte) {
	t.Helper()
	files := hubtest.SplitModel(t)
	hub, srv := hubtest.New(t, map[string]map[string][]byte{"strata/tiny-GGUF": files, "strata/gated-GGUF": files}, "strata/gated-GGUF")
	t.Setenv("HF_ENDPOINT", srv.URL+"/")
	t.Setenv("HF_TOKEN", "")
	c := NewClient()
	if c.Endpoint != srv.URL {
		t.Fatalf("endpoint %q from HF_ENDPOINT %q", c.Endpoint, srv.URL+"/")
	}
	c.FreeSpace = func(string) (int64, error) { return 1 << 40, nil }
	c.ReportEvery = time.Nanosecond // every read is reported, so a test can stop at a byte
	return hub, c, files
}

func onlyModel(t *testing.T, c *Client, repo string) GGUFModel {
	t.Helper()
	files, err := c.Files(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	models := GGUFModels(files)
	if len(models) != 1 {
		t.Fatalf("%d models in %v", len(models), files)
	}
	return models[0]
}

// checkDownloaded compares the folder's parts with the served bytes and opens the model.
func checkDownloaded(t *testing.T, dir, first string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if !strings.HasSuffix(name, ".gguf") {
			continue
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: downloaded bytes differ (%v)", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, name+PartialSuffix)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the partial file is still there", name)
		}
	}
	f, err := gguf.Open(first)
	if err != nil {
		t.Fatalf("the downloaded model does not open: %v", err)
	}
	if f.PartCount() != 3 {
		t.Errorf("%d parts", f.PartCount())
	}
	f.Close()
}

func TestListingAndSearch(t *testing.T) {
	_, c, files := setup(t)
	listed, err := c.Files(context.Background(), "strata/tiny-GGUF")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(files) {
		t.Fatalf("listed %v, served %d files", listed, len(files))
	}
	for _, f := range listed {
		b := files[f.Path]
		sum := sha256.Sum256(b)
		if f.Size != int64(len(b)) {
			t.Errorf("%s: size %d, want %d", f.Path, f.Size, len(b))
		}
		if strings.HasSuffix(f.Path, ".gguf") != (f.SHA256 == hex.EncodeToString(sum[:])) {
			t.Errorf("%s: sha256 %q", f.Path, f.SHA256)
		}
	}
	m := GGUFModels(listed)
	if len(m) != 1 || len(m[0].Parts) != 3 || m[0].Name != "tiny-Q8_0-00001-of-00003.gguf" {
		t.Fatalf("models %+v", m)
	}
	var total int64
	for name, b := range files {
		if strings.HasSuffix(name, ".gguf") {
			total += int64(len(b))
		}
	}
	if m[0].Size() != total {
		t.Errorf("model size %d, want %d", m[0].Size(), total)
	}
	// A set with a part missing is not offered.
	if got := GGUFModels(listed[:2]); len(got) != 0 {
		t.Errorf("incomplete set offered: %+v", got)
	}
	repos, err := c.Search(context.Background(), "TINY", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 1 || repos[0].ID != "strata/tiny-GGUF" || repos[0].Downloads != 7 {
		t.Errorf("search: %+v", repos)
	}
	if repos, err := c.Search(context.Background(), "gated", 10); err != nil || len(repos) != 1 || !repos[0].Gated {
		t.Errorf("search gated: %+v %v", repos, err)
	}
	if repos, err := c.Search(context.Background(), "nothing-like-it", 10); err != nil || len(repos) != 0 {
		t.Errorf("search without matches: %+v %v", repos, err)
	}
}

func TestDownloadWhole(t *testing.T) {
	hub, c, files := setup(t)
	m := onlyModel(t, c, "strata/tiny-GGUF")
	dir := filepath.Join(t.TempDir(), "models")
	var last Progress
	first, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, func(p Progress) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	if first != filepath.Join(dir, m.Parts[0].Path) {
		t.Errorf("path %s", first)
	}
	checkDownloaded(t, dir, first, files)
	if last.Done != m.Size() || last.Total != m.Size() || last.Fraction() != 1 {
		t.Errorf("last progress %+v", last)
	}
	for _, r := range hub.Ranges() {
		if r != "" {
			t.Errorf("a fresh download asked for a range: %q", r)
		}
	}
	// Again: every part is there, nothing is fetched.
	n := len(hub.Ranges())
	if _, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, nil); err != nil || len(hub.Ranges()) != n {
		t.Errorf("second download: %v, %d requests", err, len(hub.Ranges())-n)
	}
}

// TestDownloadResumesCuts: the connection drops at several points, in the first and the
// last part; each time the download goes on from the byte it reached.
func TestDownloadResumesCuts(t *testing.T) {
	hub, c, files := setup(t)
	m := onlyModel(t, c, "strata/tiny-GGUF")
	p0, p2 := m.Parts[0].Size, m.Parts[2].Size
	hub.SetCuts(1000, p0/2, p0-1, p2/3)
	dir := t.TempDir()
	first, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, first, files)
	want := []string{"bytes=1000-", fmt.Sprintf("bytes=%d-", p0/2), fmt.Sprintf("bytes=%d-", p0-1), fmt.Sprintf("bytes=%d-", p2/3)}
	var got []string
	for _, r := range hub.Ranges() {
		if r != "" {
			got = append(got, r)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("resumed with %q, want %q", got, want)
	}
}

// TestDownloadPauseAndResume: a download stopped part way (a pause, or the app closed)
// keeps its partial file, and a later one goes on from the byte it reached, in the first
// part and in the second.
func TestDownloadPauseAndResume(t *testing.T) {
	hub, c, files := setup(t)
	m := onlyModel(t, c, "strata/tiny-GGUF")
	dir := t.TempDir()
	stops := []int64{m.Parts[0].Size / 3, m.Parts[1].Size / 2}
	for i, at := range stops {
		hub.SetHolds(at)
		ctx, cancel := context.WithCancelCause(context.Background())
		target := at
		if i == 1 {
			target += m.Parts[0].Size
		}
		_, err := c.Download(ctx, "strata/tiny-GGUF", m, dir, func(p Progress) {
			if p.Done == target {
				cancel(errPaused) // the client holds the bytes up to the hold: pause there
			}
		})
		cancel(nil)
		if !errors.Is(err, errPaused) || !strings.Contains(err.Error(), "kept to resume") {
			t.Fatalf("stopped download: %v", err)
		}
		st, err := os.Stat(filepath.Join(dir, m.Parts[i].Path+PartialSuffix))
		if err != nil || st.Size() != at {
			t.Fatalf("partial file of part %d: %v (%d bytes, want %d)", i+1, err, st.Size(), at)
		}
	}
	n := len(hub.Ranges())
	first, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, first, files)
	want := []string{fmt.Sprintf("bytes=%d-", stops[1]), ""}
	if got := hub.Ranges()[n:]; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("after the pauses the download asked for %q, want %q", got, want)
	}
	if got := hub.Ranges()[1]; got != fmt.Sprintf("bytes=%d-", stops[0]) {
		t.Errorf("the second run began with %q, want the range from %d", got, stops[0])
	}
}

func TestDownloadChecksumMismatch(t *testing.T) {
	hub, c, _ := setup(t)
	m0 := onlyModel(t, c, "strata/tiny-GGUF")
	bad := m0.Parts[1].Path
	hub.SetBadSHA(bad)
	m := onlyModel(t, c, "strata/tiny-GGUF")
	dir := t.TempDir()
	_, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, nil)
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.File != bad || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("error %v", err)
	}
	for _, p := range []string{filepath.Join(dir, bad), filepath.Join(dir, bad+PartialSuffix)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there", p)
		}
	}
}

func TestHubErrorsInPlainWords(t *testing.T) {
	_, c, _ := setup(t)
	ctx := context.Background()
	_, err := c.Files(ctx, "strata/gated-GGUF")
	if !errors.Is(err, ErrGated) || !strings.Contains(err.Error(), "HF_TOKEN") || !strings.Contains(err.Error(), "strata/gated-GGUF") {
		t.Errorf("gated: %v", err)
	}
	_, err = c.Files(ctx, "strata/no-such-GGUF")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), "check the name") {
		t.Errorf("missing repo: %v", err)
	}
	m := onlyModel(t, c, "strata/tiny-GGUF")
	m.Parts[0].Path = "nothing.gguf"
	_, err = c.Download(ctx, "strata/tiny-GGUF", m, t.TempDir(), nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no file by that name") {
		t.Errorf("missing file: %v", err)
	}
	if err := ValidRepo("no-slash"); err == nil {
		t.Error("a repository name without owner accepted")
	}
	// HF_TOKEN opens the gated repository.
	t.Setenv("HF_TOKEN", "secret")
	ct := NewClient()
	ct.FreeSpace = c.FreeSpace
	if _, err := ct.Files(ctx, "strata/gated-GGUF"); err != nil {
		t.Errorf("gated with the token: %v", err)
	}
}

func TestDownloadRefusesAFullDisk(t *testing.T) {
	hub, c, _ := setup(t)
	m := onlyModel(t, c, "strata/tiny-GGUF")
	c.FreeSpace = func(string) (int64, error) { return m.Size() / 2, nil }
	dir := t.TempDir()
	_, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, nil)
	var se *SpaceError
	if !errors.As(err, &se) || se.Need != m.Size() || se.Free != m.Size()/2 || !strings.Contains(err.Error(), "Free "+HumanBytes(m.Size()-m.Size()/2)) {
		t.Fatalf("error %v", err)
	}
	if len(hub.Ranges()) != 0 {
		t.Errorf("%d downloads started", len(hub.Ranges()))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files written: %v", entries)
	}
}

func TestJobPauseResumeCancel(t *testing.T) {
	hub, c, files := setup(t)
	m := onlyModel(t, c, "strata/tiny-GGUF")
	dir := t.TempDir()
	j := NewJob(c, "strata/tiny-GGUF", m, dir)
	hub.SetCuts(m.Parts[0].Size / 4) // the connection drops there: retried
	hub.SetHolds(m.Parts[0].Size / 2)
	reached := make(chan struct{}, 1)
	j.SetOnUpdate(func(s JobStatus) {
		if s.Progress.Done == m.Parts[0].Size/2 {
			select {
			case reached <- struct{}{}:
			default:
			}
		}
	})
	j.Resume()
	<-reached
	j.Pause()
	st := j.Status()
	if st.State != JobPaused || st.Progress.Done != m.Parts[0].Size/2 {
		t.Fatalf("after Pause: %+v", st)
	}
	pend := PendingJobs(c, dir)
	if len(pend) != 1 || pend[0].Repo != "strata/tiny-GGUF" || pend[0].Status().Progress.Done != m.Parts[0].Size/2 {
		t.Fatalf("pending after a pause: %d jobs", len(pend))
	}
	// The job found again (as after a restart) finishes the download.
	j = pend[0]
	j.Resume()
	if st := j.Wait(); st.State != JobDone || st.Err != nil {
		t.Fatalf("resumed: %+v", st)
	}
	checkDownloaded(t, dir, j.Status().Path, files)
	if pend := PendingJobs(c, dir); len(pend) != 0 {
		t.Errorf("%d pending after done", len(pend))
	}

	// Cancel, in the second part, deletes what the download wrote.
	dir2 := t.TempDir()
	j2 := NewJob(c, "strata/tiny-GGUF", m, dir2)
	hub.SetHolds(m.Parts[1].Size / 2)
	j2.SetOnUpdate(func(s JobStatus) {
		if s.Progress.Done == m.Parts[0].Size+m.Parts[1].Size/2 {
			select {
			case reached <- struct{}{}:
			default:
			}
		}
	})
	j2.Resume()
	<-reached
	if err := j2.Cancel(); err != nil {
		t.Fatal(err)
	}
	if st := j2.Status(); st.State != JobCancelled {
		t.Errorf("state %s", st.State)
	}
	if entries, _ := os.ReadDir(dir2); len(entries) != 0 {
		t.Errorf("left after cancel: %v", entries)
	}
	j2.Resume()
	if st := j2.Status(); st.State != JobCancelled {
		t.Errorf("a cancelled job resumed: %s", st.State)
	}
}
