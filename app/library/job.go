package library

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// JobState is where a download job stands.
type JobState string

const (
	JobRunning   JobState = "running"
	JobPaused    JobState = "paused"
	JobDone      JobState = "done"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// errPaused is the cause a paused download stops with.
var errPaused = errors.New("paused")

// Job is one model's download that can be paused, resumed and cancelled; the GUI's library
// screen holds one per download. Its state and progress are read with Status.
type Job struct {
	Client *Client
	Repo   string
	Model  GGUFModel
	Dir    string

	mu       sync.Mutex
	onUpdate func(JobStatus)
	st       JobStatus
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when the current run ends
}

// JobStatus is a snapshot of a job.
type JobStatus struct {
	State    JobState
	Progress Progress
	Path     string // the first part's path, once done
	Err      error  // why it failed
}

// NewJob makes a job for m of repo into dir; it starts with Resume. A job's partial files
// are described by a small JSON note beside them (NoteSuffix), so a download interrupted
// by a restart is found again by PendingJobs.
func NewJob(c *Client, repo string, m GGUFModel, dir string) *Job {
	j := &Job{Client: c, Repo: repo, Model: m, Dir: dir}
	j.st = JobStatus{State: JobPaused, Progress: Progress{Total: m.Size(), Done: m.Size() - Missing(dir, m)}}
	return j
}

// Status returns the job's state now.
func (j *Job) Status() JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.st
}

// SetOnUpdate sets what is called (from the download's goroutine) after every change;
// nil for nothing.
func (j *Job) SetOnUpdate(f func(JobStatus)) {
	j.mu.Lock()
	j.onUpdate = f
	j.mu.Unlock()
}

func (j *Job) update(f func(*JobStatus)) {
	j.mu.Lock()
	f(&j.st)
	st, on := j.st, j.onUpdate
	j.mu.Unlock()
	if on != nil {
		on(st)
	}
}

// Resume starts (or restarts) the download in the background; it does nothing while the
// job runs or once it is done or cancelled.
func (j *Job) Resume() {
	j.mu.Lock()
	if j.st.State == JobRunning || j.st.State == JobDone || j.st.State == JobCancelled {
		j.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	j.cancel, j.done = cancel, make(chan struct{})
	j.st.State, j.st.Err = JobRunning, nil
	done := j.done
	j.mu.Unlock()
	if err := writeNote(j.Dir, j.Repo, j.Model); err != nil {
		j.finish(done, "", err)
		return
	}
	go func() {
		path, err := j.Client.Download(ctx, j.Repo, j.Model, j.Dir, func(p Progress) {
			j.update(func(s *JobStatus) { s.Progress = p })
		})
		j.finish(done, path, err)
		cancel(nil)
	}()
}

// finish records how a run ended.
func (j *Job) finish(done chan struct{}, path string, err error) {
	j.update(func(s *JobStatus) {
		switch {
		case err == nil:
			s.State, s.Path = JobDone, path
			s.Progress.Done = s.Progress.Total
			s.Progress.Left = 0
			removeNote(j.Dir, j.Model)
		case s.State == JobCancelled:
		case errors.Is(err, errPaused):
			s.State = JobPaused
			s.Progress.BytesPerSec, s.Progress.Left = 0, 0
		default:
			s.State, s.Err = JobFailed, err
			s.Progress.BytesPerSec, s.Progress.Left = 0, 0
		}
	})
	close(done)
}

// stop cancels the running download with cause and waits for it to end.
func (j *Job) stop(cause error) {
	j.mu.Lock()
	cancel, done := j.cancel, j.done
	j.mu.Unlock()
	if cancel != nil {
		cancel(cause)
		<-done
	}
}

// Pause stops the download and keeps what it has: Resume goes on from there (with an
// HTTP Range request), in this run of the app or a later one.
func (j *Job) Pause() {
	j.stop(errPaused)
}

// Cancel stops the download and deletes its partial files.
func (j *Job) Cancel() error {
	j.mu.Lock()
	if j.st.State == JobDone {
		j.mu.Unlock()
		return nil
	}
	j.st.State = JobCancelled
	j.mu.Unlock()
	j.stop(errors.New("cancelled"))
	removeNote(j.Dir, j.Model)
	err := Discard(j.Dir, j.Model)
	j.update(func(s *JobStatus) { s.Progress.Done, s.Progress.BytesPerSec, s.Progress.Left = 0, 0, 0 })
	return err
}

// Wait blocks until the current run (if any) ends and returns the status then.
func (j *Job) Wait() JobStatus {
	j.mu.Lock()
	done := j.done
	j.mu.Unlock()
	if done != nil {
		<-done
	}
	return j.Status()
}

// NoteSuffix names the note beside a download's first part that says what it is, so an
// interrupted download can be resumed after a restart.
const NoteSuffix = ".download.json"

type note struct {
	Repo  string     `json:"repo"`
	Parts []RepoFile `json:"parts"`
}

func notePath(dir string, m GGUFModel) string {
	return LocalPath(dir, m.Parts[0]) + NoteSuffix
}

func writeNote(dir string, repo string, m GGUFModel) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("library: models folder: %w", err)
	}
	b, err := json.MarshalIndent(note{Repo: repo, Parts: m.Parts}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(notePath(dir, m), b, 0o644); err != nil {
		return fmt.Errorf("library: %w", err)
	}
	return nil
}

func removeNote(dir string, m GGUFModel) { os.Remove(notePath(dir, m)) }

// PendingJobs finds the downloads left unfinished in dir (paused, or cut by a restart),
// as paused jobs of c.
func PendingJobs(c *Client, dir string) []*Job {
	notes, _ := filepath.Glob(filepath.Join(dir, "*"+NoteSuffix))
	var out []*Job
	for _, p := range notes {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var n note
		if json.Unmarshal(b, &n) != nil || ValidRepo(n.Repo) != nil || len(n.Parts) == 0 ||
			filepath.Base(LocalPath(dir, n.Parts[0]))+NoteSuffix != filepath.Base(p) || strings.ContainsAny(n.Parts[0].Path, "\x00") {
			continue
		}
		out = append(out, NewJob(c, n.Repo, GGUFModel{Name: n.Parts[0].Path, Parts: n.Parts}, dir))
	}
	return out
}
