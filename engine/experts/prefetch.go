package experts

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"strata/platform"
)

// queuePerWorker is how many experts may wait per prefetch worker before new requests are
// dropped: a prefetch that starts late is worth less than none.
const queuePerWorker = 64

// Prefetcher asks the OS to read cold experts' pages in ahead of the CPU pool touching
// them (madvise WILLNEED / PrefetchVirtualMemory), from a few goroutines so the caller
// never blocks.
type Prefetcher struct {
	l      *Layout
	queue  chan ID
	advise func([]byte) error
	wg     sync.WaitGroup

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool

	queued, done, dropped, failed atomic.Int64
}

// PrefetchStats counts a prefetcher's requests.
type PrefetchStats struct {
	Queued  int64 // accepted into the queue
	Done    int64 // advised (successfully or not)
	Dropped int64 // refused: queue full, closed, or not an expert of the model
	Failed  int64 // the OS call returned an error
}

// NewPrefetcher starts workers goroutines (at least 1) advising on l's mapping.
func NewPrefetcher(l *Layout, workers int) *Prefetcher {
	workers = max(workers, 1)
	return newPrefetcher(l, workers, workers*queuePerWorker, platform.AdviseWillNeed)
}

func newPrefetcher(l *Layout, workers, queue int, advise func([]byte) error) *Prefetcher {
	p := &Prefetcher{l: l, queue: make(chan ID, queue), advise: advise}
	for range workers {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *Prefetcher) work() {
	defer p.wg.Done()
	for id := range p.queue {
		var errs []error
		if g, u, d := p.l.Blob(id); g != nil {
			for _, b := range [3][]byte{g, u, d} {
				if err := p.advise(b); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			p.failed.Add(1)
			slog.Debug("experts: prefetch", "file", p.l.Path, "expert", id, "err", err)
		}
		p.done.Add(1)
	}
}

// Prefetch queues ids without blocking; what does not fit in the queue is dropped (and
// counted), as is everything after Close.
func (p *Prefetcher) Prefetch(ids []ID) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, id := range ids {
		if p.closed || !p.l.valid(id) {
			p.dropped.Add(1)
			continue
		}
		select {
		case p.queue <- id:
			p.queued.Add(1)
		default:
			p.dropped.Add(1)
		}
	}
}

// Stats returns the counts so far.
func (p *Prefetcher) Stats() PrefetchStats {
	return PrefetchStats{Queued: p.queued.Load(), Done: p.done.Load(), Dropped: p.dropped.Load(), Failed: p.failed.Load()}
}

// Close stops accepting requests, lets the workers finish what is queued and waits for
// them. It may be called more than once.
func (p *Prefetcher) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// DropPages tells the OS it may drop the pages of l's mapping that lie wholly inside the
// given experts' bytes (used for experts that moved to VRAM). Pages shared with bytes of
// other experts or tensors are kept; neighbouring experts in one call merge, so their
// shared pages go too.
func DropPages(l *Layout, ids []ID) error {
	return dropPages(l, ids, os.Getpagesize(), platform.AdviseDontNeed)
}

func dropPages(l *Layout, ids []ID, page int, advise func([]byte) error) error {
	if l.data == nil {
		return fmt.Errorf("experts: drop pages of %s: the layout is closed", l.Path)
	}
	var ext []Extent
	for _, id := range ids {
		if !l.valid(id) {
			return fmt.Errorf("experts: drop pages of %s: %s is outside the model", l.Path, id)
		}
		parts := l.Parts(id)
		ext = append(ext, parts[:]...)
	}
	slices.SortFunc(ext, compareExtents)
	var merged []Extent
	for _, e := range ext {
		if n := len(merged); n > 0 && e.File == merged[n-1].File && e.Offset <= merged[n-1].End() {
			merged[n-1].Len = max(merged[n-1].End(), e.End()) - merged[n-1].Offset
			continue
		}
		merged = append(merged, e)
	}
	// Page boundaries are those of addresses: the mapping starts on a page, but a GGUF
	// layout's view starts at the data section.
	pg := int64(page)
	var errs []error
	for _, e := range merged {
		data, base := l.mapped(e.File)
		baseAddr := int64(uintptr(unsafe.Pointer(unsafe.SliceData(data)))) - base
		lo := alignUp(baseAddr+e.Offset, pg) - baseAddr
		hi := alignDown(baseAddr+e.End(), pg) - baseAddr
		if hi <= lo {
			continue
		}
		if err := advise(l.view(Extent{Offset: lo, Len: hi - lo, File: e.File})); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("experts: drop pages of %s: %w", l.Path, err)
	}
	return nil
}
