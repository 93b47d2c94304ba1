package experts

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// addr is where b starts in memory.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// recorder collects the ranges an advise function is called with.
type recorder struct {
	mu  sync.Mutex
	got [][]byte
}

func (r *recorder) advise(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, b)
	return nil
}

func TestPrefetcherAdvises(t *testing.T) {
	path := handModel{layers: 2, experts: 4, rows: 48, cols: 64, seed: 1}.write(t, filepath.Join(t.TempDir(), "m.gguf"))
	l, _ := GGUFLayout(openGGUF(t, path))
	var r recorder
	p := newPrefetcher(l, 2, 16, r.advise)
	ids := []ID{{0, 1}, {1, 3}}
	p.Prefetch(ids)
	p.Close()
	var want [][]byte
	for _, id := range ids {
		g, u, d := l.Blob(id)
		want = append(want, g, u, d)
	}
	if len(r.got) != len(want) {
		t.Fatalf("%d advice calls, want %d", len(r.got), len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(r.got, func(b []byte) bool { return addr(b) == addr(w) && len(b) == len(w) }) {
			t.Errorf("no advice for the %d bytes at %#x", len(w), addr(w))
		}
	}
	if st := p.Stats(); st.Queued != 2 || st.Done != 2 || st.Dropped != 0 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPrefetcherDropsWhenFull(t *testing.T) {
	path := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 1}.write(t, filepath.Join(t.TempDir(), "m.gguf"))
	l, _ := GGUFLayout(openGGUF(t, path))
	entered, release := make(chan struct{}, 16), make(chan struct{})
	p := newPrefetcher(l, 1, 2, func([]byte) error {
		entered <- struct{}{}
		<-release
		return nil
	})
	p.Prefetch([]ID{{0, 0}})
	<-entered // the worker holds the first expert; the queue of 2 is empty
	p.Prefetch([]ID{{0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}})
	p.Prefetch([]ID{{5, 0}, {0, -1}}) // not experts of the model
	if st := p.Stats(); st.Queued != 3 || st.Dropped != 5 {
		t.Errorf("after filling the queue: %+v, want 3 queued and 5 dropped", st)
	}
	close(release)
	p.Close()
	if st := p.Stats(); st.Done != 3 {
		t.Errorf("after Close: %+v, want 3 done", st)
	}
	// A closed prefetcher refuses quietly, and closing again is harmless.
	p.Prefetch([]ID{{0, 0}})
	p.Close()
	if st := p.Stats(); st.Dropped != 6 || st.Queued != 3 {
		t.Errorf("after a Prefetch on a closed prefetcher: %+v", st)
	}
}

func TestPrefetcherOS(t *testing.T) {
	path := synthModel(t, t.TempDir())
	l, _ := GGUFLayout(openGGUF(t, path))
	p := NewPrefetcher(l, 0)
	p.Prefetch(allIDs(l.Shape))
	p.Close()
	if st := p.Stats(); st.Failed != 0 || st.Done != st.Queued || st.Queued+st.Dropped != int64(l.Shape.Count()) {
		t.Errorf("stats %+v for %d experts", st, l.Shape.Count())
	}
	if err := DropPages(l, allIDs(l.Shape)); err != nil {
		t.Error(err)
	}
}

func TestDropPagesRounding(t *testing.T) {
	const page = 4096
	dir := t.TempDir()
	// Parts of 12,288 bytes at offsets that are not page multiples, and parts far smaller
	// than a page.
	big := handModel{layers: 2, experts: 4, rows: 48, cols: 64, seed: 1}.write(t, filepath.Join(dir, "big.gguf"))
	small := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 1}.write(t, filepath.Join(dir, "small.gguf"))
	for _, c := range []struct {
		path string
		ids  []ID
		some bool // some pages must be dropped
	}{
		{big, []ID{{0, 1}}, true},
		{big, []ID{{1, 0}, {1, 1}, {0, 3}}, true},
		{small, []ID{{0, 1}}, false},
		{small, allIDs(Shape{Layers: 2, Experts: 4}), false},
	} {
		f := openGGUF(t, c.path)
		l, _ := GGUFLayout(f)
		var r recorder
		if err := dropPages(l, c.ids, page, r.advise); err != nil {
			t.Fatal(err)
		}
		// Every byte of the wanted experts, as addresses.
		inside := map[uintptr]bool{}
		for _, id := range c.ids {
			g, u, d := l.Blob(id)
			for _, b := range [][]byte{g, u, d} {
				for i := range b {
					inside[addr(b)+uintptr(i)] = true
				}
			}
		}
		var dropped int
		for _, b := range r.got {
			if addr(b)%page != 0 || len(b)%page != 0 || len(b) == 0 {
				t.Errorf("%s %v: advice on %d bytes at %#x is not whole pages", filepath.Base(c.path), c.ids, len(b), addr(b))
			}
			for i := range b {
				if !inside[addr(b)+uintptr(i)] {
					t.Fatalf("%s %v: dropped byte %#x is not one of the experts'", filepath.Base(c.path), c.ids, addr(b)+uintptr(i))
				}
			}
			dropped += len(b)
		}
		// Every whole page inside the experts' bytes is dropped.
		var whole int
		for a := range inside {
			if a%page == 0 {
				full := true
				for i := uintptr(0); i < page && full; i++ {
					full = inside[a+i]
				}
				if full {
					whole += page
				}
			}
		}
		if c.some && dropped == 0 {
			t.Errorf("%s %v: nothing dropped", filepath.Base(c.path), c.ids)
		}
		if dropped != whole {
			t.Errorf("%s %v: dropped %d bytes, %d bytes of whole pages lie inside the experts", filepath.Base(c.path), c.ids, dropped, whole)
		}
	}
	l, _ := GGUFLayout(openGGUF(t, big))
	if err := DropPages(l, []ID{{2, 0}}); err == nil {
		t.Error("no error for an expert outside the model")
	}
}

// TestPrefetchColdSkipsRecentExperts: a cold expert is prefetched on its first use and again
// once more than prefetchRecent steps have passed since its last one, never twice in a step,
// and not while it was used within the last prefetchRecent steps.
func TestPrefetchColdSkipsRecentExperts(t *testing.T) {
	sh := Shape{Layers: 2, Experts: 4}
	c := &Cache{sh: sh, coldUsed: make([]uint64, sh.Count()), lastLayer: -1}
	cold := func(es ...int32) []entry {
		var out []entry
		for _, e := range es {
			out = append(out, entry{expt: e})
		}
		return out
	}
	want := func(step string, got []ID, experts ...int) {
		t.Helper()
		var w []ID
		for _, e := range experts {
			w = append(w, ID{1, e})
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: prefetched %v, want %v", step, got, w)
		}
	}
	want("first use", c.prefetchCold(1, cold(0, 2, 0)), 0, 2)
	c.steps++
	want("next step", c.prefetchCold(1, cold(0, 3)), 3)
	if got := c.prefetchCold(0, cold(0)); !slices.Equal(got, []ID{{0, 0}}) {
		t.Errorf("layer 0's expert 0 shares layer 1's record: prefetched %v", got)
	}
	c.steps += prefetchRecent // expert 0 last used prefetchRecent steps ago: still recent
	want("recent", c.prefetchCold(1, cold(0)))
	c.steps += prefetchRecent + 1
	want("stale", c.prefetchCold(1, cold(0, 2, 3)), 0, 2, 3)
}
