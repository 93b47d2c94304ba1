package gui

import (
	"sync"
	"testing"
)

// uiLoop plays the part of Fyne's main loop in tests: functions posted from any goroutine
// run one at a time on its goroutine, so tests touch widgets from one goroutine only, as
// the real app does. (The test driver's fyne.Do runs functions on the caller's goroutine.)
type uiLoop struct {
	mu    sync.Mutex
	queue []func()
	wake  chan struct{}
	quit  chan struct{}
	ended chan struct{} // closed when run has returned
}

func newUILoop(t *testing.T) *uiLoop {
	u := &uiLoop{wake: make(chan struct{}, 1), quit: make(chan struct{}), ended: make(chan struct{})}
	go u.run()
	// Wait for the loop to stop: a refresh still running would touch Fyne's shared widget
	// cache while the next test draws (go test -race saw it).
	t.Cleanup(func() { close(u.quit); <-u.ended })
	return u
}

func (u *uiLoop) run() {
	defer close(u.ended)
	for {
		select {
		case <-u.quit:
			return
		case <-u.wake:
		}
		for {
			select {
			case <-u.quit:
				return
			default:
			}
			u.mu.Lock()
			if len(u.queue) == 0 {
				u.mu.Unlock()
				break
			}
			f := u.queue[0]
			u.queue = u.queue[1:]
			u.mu.Unlock()
			f()
		}
	}
}

// post queues f and returns at once (fyne.Do).
func (u *uiLoop) post(f func()) {
	u.mu.Lock()
	u.queue = append(u.queue, f)
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// do runs f on the loop and waits for it (fyne.DoAndWait, from a test goroutine).
func (u *uiLoop) do(f func()) {
	done := make(chan struct{})
	u.post(func() { f(); close(done) })
	<-done
}
