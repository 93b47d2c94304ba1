package experts

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"strata/platform"
)

// ColdReader reads cold experts for a batch around the page cache: each part's aligned span
// with an unbuffered read (O_DIRECT / FILE_FLAG_NO_BUFFERING), several in flight, into one
// aligned buffer that the next call reuses. Streaming a prefill's misses this way neither
// waits on page faults one after another nor fills RAM with experts that are read once.
// One caller at a time.
type ColdReader struct {
	l     *Layout
	files [][]*os.File // [worker][file]
	buf   []byte       // platform.AlignedAlloc, PackAlign-aligned
}

// NewColdReader opens workers unbuffered handles on each of l's files and checks that an unbuffered
// read of probe matches the mapping. When that is not possible it returns nil and why.
func NewColdReader(l *Layout, probe ID, workers int) (*ColdReader, string) {
	o := DefaultFillOptions()
	o.Workers = max(workers, 1)
	o.openUnbuffered = platform.OpenUnbuffered
	files, reason := openProbed(l, probe, o)
	if reason != "" {
		return nil, reason
	}
	return &ColdReader{l: l, files: files}, ""
}

// Read returns the gate, up and down bytes of every id, views into the reader's buffer that
// stay valid until the next Read.
func (r *ColdReader) Read(ids []ID) ([][3][]byte, error) {
	type item struct {
		e      Extent
		off    int64 // in buf
		id, pt int
	}
	var items []item
	var total int64
	for i, id := range ids {
		for p, e := range r.l.Parts(id) {
			if e.Len == 0 {
				return nil, fmt.Errorf("experts: %s: cold read of %s: not in the model", r.l.Path, id)
			}
			items = append(items, item{e: e, off: total, id: i, pt: p})
			total += alignUp(e.End(), PackAlign) - alignDown(e.Offset, PackAlign)
		}
	}
	if int64(len(r.buf)) < total {
		if r.buf != nil {
			if err := platform.FreeAligned(r.buf); err != nil {
				return nil, fmt.Errorf("experts: cold read buffer: %w", err)
			}
			r.buf = nil
		}
		buf, err := platform.AlignedAlloc(int(total), PackAlign)
		if err != nil {
			return nil, fmt.Errorf("experts: cold read buffer of %d MiB: %w", total>>20, err)
		}
		r.buf = buf
	}
	out := make([][3][]byte, len(ids))
	errs := make([]error, len(r.files))
	var wg sync.WaitGroup
	for w, fhs := range r.files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < len(items); k += len(r.files) {
				it := items[k]
				span := alignUp(it.e.End(), PackAlign) - alignDown(it.e.Offset, PackAlign)
				b, err := readDirect(fhs[it.e.File], r.buf[it.off:it.off+span], it.e, r.l)
				if err != nil {
					errs[w] = fmt.Errorf("experts: %s: unbuffered read of %s part %d: %w", r.l.Path, ids[it.id], it.pt, err)
					return
				}
				out[it.id][it.pt] = b
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Close releases the handles and the buffer.
func (r *ColdReader) Close() error {
	var errs []error
	for _, fhs := range r.files {
		for _, fh := range fhs {
			errs = append(errs, fh.Close())
		}
	}
	r.files = nil
	if r.buf != nil {
		errs = append(errs, platform.FreeAligned(r.buf))
		r.buf = nil
	}
	return errors.Join(errs...)
}
