package library

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"strata/platform"
)

// PartialSuffix marks a file being downloaded; it gets its final name only once its size
// and SHA-256 are checked, so a model file in the folder is always whole.
const PartialSuffix = ".part"

// maxRetries bounds how many times a download that was cut, and had made progress since the
// last cut, asks again from where it stopped.
const maxRetries = 20

// Progress is a download's state for a progress bar.
type Progress struct {
	File        string        // the part being fetched
	Done, Total int64         // bytes of the whole model
	BytesPerSec float64       // recent speed (0 until known)
	Left        time.Duration // time left at that speed (0 when unknown)
}

// Fraction is Done/Total, 0 when the total is unknown.
func (p Progress) Fraction() float64 {
	if p.Total <= 0 {
		return 0
	}
	return float64(p.Done) / float64(p.Total)
}

// SpaceError says the models folder's drive cannot hold the download.
type SpaceError struct {
	Dir        string
	Need, Free int64
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("not enough disk space: the download needs %s more, and the drive that holds %s has %s free. Free %s, or choose a models folder on another drive.",
		HumanBytes(e.Need), e.Dir, HumanBytes(e.Free), HumanBytes(e.Need-e.Free))
}

// ChecksumError says a downloaded file is not the one the Hub publishes; the file is deleted.
type ChecksumError struct {
	File      string
	Got, Want string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s was downloaded, but its SHA-256 (%s) is not the one Hugging Face publishes for it (%s), so the file was deleted. Try the download again; if this happens again, the connection or the mirror (HF_ENDPOINT) changes the data.",
		e.File, e.Got, e.Want)
}

// HumanBytes writes n in GB/MB as people read file sizes (powers of 1000).
func HumanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

// LocalPath is where file f of a repository lands in dir: its base name (a split model's
// parts stay side by side, as the engine looks for them).
func LocalPath(dir string, f RepoFile) string {
	return filepath.Join(dir, path.Base(f.Path))
}

// Missing is how many bytes of m are still to fetch into dir: every part but the finished
// ones, less what partial files hold.
func Missing(dir string, m GGUFModel) int64 {
	var n int64
	for _, p := range m.Parts {
		final := LocalPath(dir, p)
		if st, err := os.Stat(final); err == nil && st.Size() == p.Size {
			continue
		}
		have := int64(0)
		if st, err := os.Stat(final + PartialSuffix); err == nil && st.Size() <= p.Size {
			have = st.Size()
		}
		n += p.Size - have
	}
	return n
}

// Download fetches every part of model m of repo into dir and returns the first part's
// path. A part already there is kept; a partial one (PartialSuffix) is resumed with an HTTP
// Range request, and a cut connection is resumed the same way. Free space is checked first,
// each part's SHA-256 is checked against the Hub's before it takes its final name, and a
// mismatch deletes it. Cancelling ctx stops the download and keeps the partial files (a
// pause); Discard removes them. progress (may be nil) is called from this goroutine.
func (c *Client) Download(ctx context.Context, repo string, m GGUFModel, dir string, progress func(Progress)) (string, error) {
	if err := ValidRepo(repo); err != nil {
		return "", err
	}
	if len(m.Parts) == 0 {
		return "", fmt.Errorf("library: %s: no file to download", repo)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("library: models folder: %w", err)
	}
	need := Missing(dir, m)
	free := c.FreeSpace
	if free == nil {
		free = platform.FreeSpace
	}
	if need > 0 {
		if have, err := free(dir); err == nil && have < need {
			return "", &SpaceError{Dir: dir, Need: need, Free: have}
		}
	}
	meter := newMeter(m.Size(), progress)
	if c.ReportEvery > 0 {
		meter.every = c.ReportEvery
	}
	for _, p := range m.Parts {
		final := LocalPath(dir, p)
		if st, err := os.Stat(final); err == nil && st.Size() == p.Size {
			meter.base += p.Size
			continue
		}
		meter.file = p.Path
		if err := c.fetch(ctx, repo, p, final, meter); err != nil {
			return "", err
		}
		meter.base += p.Size
	}
	meter.report(meter.base, true)
	return LocalPath(dir, m.Parts[0]), nil
}

// Discard deletes what a cancelled download of m wrote in dir: the partial files, and the
// finished parts of a split model that is not whole (a whole one is left alone).
func Discard(dir string, m GGUFModel) error {
	whole := Missing(dir, m) == 0
	var errs []error
	for _, p := range m.Parts {
		paths := []string{LocalPath(dir, p) + PartialSuffix}
		if !whole {
			paths = append(paths, LocalPath(dir, p))
		}
		for _, path := range paths {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// fetch downloads one file into final+PartialSuffix, resuming it, retrying cuts that made
// progress, then checks it and renames it to final.
func (c *Client) fetch(ctx context.Context, repo string, f RepoFile, final string, meter *meter) error {
	partial := final + PartialSuffix
	fh, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("library: %w", err)
	}
	defer func() {
		if fh != nil {
			fh.Close()
		}
	}()
	h := sha256.New()
	have, err := rehash(fh, h, f.Size)
	if err != nil {
		return fmt.Errorf("library: %s: %w", partial, err)
	}
	meter.report(meter.base+have, true)
	for attempt := 0; have < f.Size; attempt++ {
		n, err := c.fetchRange(ctx, repo, f, fh, h, have, meter)
		have += n
		if err == nil {
			continue
		}
		var hub *HubError
		if ctx.Err() != nil || errors.As(err, &hub) || n == 0 || attempt >= maxRetries {
			if ctx.Err() != nil {
				return fmt.Errorf("library: %s: stopped at %s of %s (the partial file is kept to resume): %w", f.Path, HumanBytes(have), HumanBytes(f.Size), context.Cause(ctx))
			}
			return fmt.Errorf("library: %s: %w", f.Path, err)
		}
	}
	if have != f.Size {
		return fmt.Errorf("library: %s: %d bytes downloaded, the Hub lists %d", f.Path, have, f.Size)
	}
	if f.SHA256 != "" {
		if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
			fh.Close()
			fh = nil
			if err := os.Remove(partial); err != nil {
				return fmt.Errorf("library: %s: %w (and deleting it failed: %v)", f.Path, &ChecksumError{File: f.Path, Got: got, Want: f.SHA256}, err)
			}
			return &ChecksumError{File: f.Path, Got: got, Want: f.SHA256}
		}
	}
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("library: %s: sync: %w", partial, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("library: %s: %w", partial, err)
	}
	fh = nil
	if err := os.Rename(partial, final); err != nil {
		return fmt.Errorf("library: %w", err)
	}
	return nil
}

// rehash feeds the bytes a partial file already holds to h and returns their count; a
// partial file longer than the file is emptied.
func rehash(fh *os.File, h hash.Hash, size int64) (int64, error) {
	st, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() > size {
		return 0, fh.Truncate(0)
	}
	n, err := io.Copy(h, io.NewSectionReader(fh, 0, st.Size()))
	if err != nil {
		return 0, err
	}
	return n, nil
}

// fetchRange asks for f's bytes from offset have on and appends them to fh and h. It
// returns how many bytes it added; a server that ignores the range restarts the file.
func (c *Client) fetchRange(ctx context.Context, repo string, f RepoFile, fh *os.File, h hash.Hash, have int64, meter *meter) (int64, error) {
	header := http.Header{}
	if have > 0 {
		header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := c.get(ctx, c.resolveURL(repo, f.Path), header, repo, f.Path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	start := int64(0)
	if resp.StatusCode == http.StatusPartialContent {
		start, err = rangeStart(resp.Header.Get("Content-Range"))
		if err != nil || start != have {
			return 0, &HubError{Status: resp.StatusCode, Repo: repo, File: f.Path,
				Msg: fmt.Sprintf("%s: the server answered a resume from byte %d with %q", f.Path, have, resp.Header.Get("Content-Range"))}
		}
	}
	if start != have { // 200: the whole file again
		if err := fh.Truncate(0); err != nil {
			return 0, err
		}
		h.Reset()
		meter.report(meter.base, true)
	}
	if _, err := fh.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(io.MultiWriter(fh, h), 1<<20)
	buf := make([]byte, 256<<10)
	n := start
	var readErr error
	for n < f.Size {
		k, err := resp.Body.Read(buf[:min(int64(len(buf)), f.Size-n)])
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n - have, fmt.Errorf("write %s: %w", fh.Name(), werr)
			}
			n += int64(k)
			meter.report(meter.base+n, false)
		}
		if err != nil {
			readErr = err
			break
		}
	}
	if err := w.Flush(); err != nil {
		return n - have, fmt.Errorf("write %s: %w", fh.Name(), err)
	}
	if n < f.Size {
		if readErr == nil || readErr == io.EOF {
			readErr = io.ErrUnexpectedEOF
		}
		return n - have, fmt.Errorf("the connection was cut at byte %d of %d: %w", n, f.Size, readErr)
	}
	return n - have, nil
}

// rangeStart reads the first byte of "bytes START-END/SIZE".
func rangeStart(cr string) (int64, error) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, fmt.Errorf("content-range %q", cr)
	}
	s, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, fmt.Errorf("content-range %q", cr)
	}
	return strconv.ParseInt(s, 10, 64)
}

// meter turns byte counts into progress reports with a speed and a time left, at most a
// few times a second.
type meter struct {
	total    int64
	base     int64 // bytes of the parts already done
	progress func(Progress)
	file     string

	every    time.Duration
	last     time.Time
	lastDone int64
	speed    float64
}

func newMeter(total int64, progress func(Progress)) *meter {
	return &meter{total: total, progress: progress, last: time.Now(), every: 250 * time.Millisecond}
}

func (m *meter) report(done int64, force bool) {
	if m.progress == nil {
		return
	}
	now := time.Now()
	dt := now.Sub(m.last).Seconds()
	if !force && now.Sub(m.last) < m.every {
		return
	}
	if dt > 0 && done >= m.lastDone && m.lastDone > 0 {
		inst := float64(done-m.lastDone) / dt
		if m.speed == 0 {
			m.speed = inst
		} else {
			m.speed = 0.7*m.speed + 0.3*inst // smooth, but follow a change within seconds
		}
	}
	m.last, m.lastDone = now, done
	p := Progress{File: m.file, Done: done, Total: m.total, BytesPerSec: m.speed}
	if m.speed > 0 && done < m.total {
		p.Left = time.Duration(float64(m.total-done) / m.speed * float64(time.Second))
	}
	m.progress(p)
}
