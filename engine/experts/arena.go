package experts

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"strata/platform"
)

// FillOptions tunes FillArena. Start from DefaultFillOptions: the zero value reads through
// the mapping (Unbuffered false).
type FillOptions struct {
	Workers    int   // reads in flight (<= 0: 4)
	MergeBytes int64 // the largest single read (<= 0: 32 MiB)
	// Unbuffered reads around the page cache (O_DIRECT / FILE_FLAG_NO_BUFFERING), so the
	// OS does not keep a second copy of what the arena holds.
	Unbuffered bool
	Lock       bool // page-lock the arena (failure is noted in FillStats, not fatal)

	// openUnbuffered replaces platform.OpenUnbuffered in tests.
	openUnbuffered func(path string) (*os.File, int, error)
}

// DefaultFillOptions is 4 workers, 32 MiB reads, unbuffered, not locked.
func DefaultFillOptions() FillOptions {
	return FillOptions{Workers: 4, MergeBytes: defaultMergeBytes, Unbuffered: true}
}

const (
	defaultMergeBytes = 32 << 20
	defaultWorkers    = 4
	// maxMergeGap is the largest hole between two wanted extents that one read still
	// spans: reading a few unwanted bytes is cheaper than another request.
	maxMergeGap = 256 << 10
)

// FillStats says how a fill went.
type FillStats struct {
	Bytes      int64 // blob bytes placed in the arena
	Duration   time.Duration
	Unbuffered bool   // the blobs came through unbuffered reads
	Fallback   string // why an unbuffered fill fell back to the mapping ("" if it did not)
	// Unmapped says the file had no mapping in this process during the fill (a GGUF layout
	// of gguf.OpenUnmapped, filled with unbuffered reads), so no mapped view of it could pull
	// the experts into the page cache as a second copy of the arena.
	Unmapped    bool
	Reads       int    // read requests (unbuffered) or extent copies (mapping)
	DirectReads int    // unbuffered reads that landed in the arena without a bounce copy
	ReadBytes   int64  // bytes read from the file, alignment and merged holes included
	Locked      bool   // the arena is page-locked
	LockError   string // why locking failed ("" if it was not asked for or worked)
}

// Arena is one aligned allocation holding the blobs of a set of experts, in ascending ID
// order, each blob's gate, up and down back to back from a PackAlign boundary.
type Arena struct {
	shape   Shape
	mem     []byte
	offsets []int64    // by Shape.Index; -1 when the expert is not here
	parts   [][3]int64 // by Shape.Index: the sizes of its gate, up and down
	ids     []ID       // ascending
	aligned bool       // mem came from platform.AlignedAlloc
	locked  bool
}

// piece is one file extent that lands at dst in the arena.
type piece struct {
	src Extent
	dst int64
}

// request is one read: the pieces inside [start, end) of the file, read as the aligned
// [off, off+n). direct says the read can land in the arena as it is (see landsDirect).
type request struct {
	file       int // Extent.File of every piece
	off, n     int64
	start, end int64
	pieces     []piece
	direct     bool
}

// FillArena copies the blobs of ids (each at most once) from l's file into a new arena.
// Reads are sorted by file offset, merged up to o.MergeBytes and run on o.Workers
// goroutines. With o.Unbuffered it reads around the page cache; if that cannot open the
// file, or the first blob read that way differs from an ordinary buffered read, it copies
// through the mapping instead and says why in FillStats.Fallback. A layout of an unmapped
// GGUF (gguf.OpenUnmapped) stays unmapped through an unbuffered fill; copying through the
// mapping attaches it first (Layout.Attach maps the file). progress (may be nil, called from
// one goroutine at a time) gets bytes placed so far and the total.
func FillArena(ctx context.Context, l *Layout, ids []ID, o FillOptions, progress func(done, total int64)) (*Arena, FillStats, error) {
	start := time.Now()
	if o.Workers <= 0 {
		o.Workers = defaultWorkers
	}
	if o.MergeBytes <= 0 {
		o.MergeBytes = defaultMergeBytes
	}
	o.MergeBytes = max(alignUp(o.MergeBytes, PackAlign), 4*PackAlign)
	if o.openUnbuffered == nil {
		o.openUnbuffered = platform.OpenUnbuffered
	}
	if l.closed {
		return nil, FillStats{}, fmt.Errorf("experts: fill arena from %s: the layout is closed", l.Path)
	}
	a, err := newArena(l, ids)
	if err != nil {
		return nil, FillStats{}, fmt.Errorf("experts: fill arena from %s: %w", l.Path, err)
	}
	st := FillStats{Bytes: a.blobBytes()}
	pieces := a.pieces(l, o.MergeBytes-2*PackAlign)
	f := filler{l: l, a: a, total: st.Bytes, progress: progress}

	if o.Unbuffered && len(pieces) > 0 {
		if files, reason := openProbed(l, a.ids[0], o); reason == "" {
			err = f.unbuffered(ctx, files, mergePieces(pieces, o.MergeBytes), o, &st)
		} else {
			st.Fallback = reason
			slog.Warn("experts: unbuffered fill fell back to the mapping", "file", l.Path, "reason", reason)
		}
	}
	st.Unmapped = st.Unbuffered && !l.Attached()
	if !st.Unbuffered {
		if err = l.Attach(); err == nil {
			err = f.mapped(ctx, pieces, o.Workers)
		}
		st.Reads, st.ReadBytes = len(pieces), st.Bytes
	}
	if err != nil {
		return nil, FillStats{}, errors.Join(fmt.Errorf("experts: fill arena from %s: %w", l.Path, err), a.Close())
	}
	if o.Lock && len(a.mem) > 0 {
		if lerr := platform.LockMemory(a.mem); lerr != nil {
			st.LockError = lerr.Error()
			slog.Warn("experts: the arena stays unlocked", "bytes", len(a.mem), "err", lerr)
		} else {
			a.locked, st.Locked = true, true
		}
	}
	st.Duration = time.Since(start)
	return a, st, nil
}

// unbuffered runs the merged reads on o.Workers goroutines, one handle of each file each,
// and closes the handles.
func (f *filler) unbuffered(ctx context.Context, files [][]*os.File, reqs []request, o FillOptions, st *FillStats) error {
	defer closeHandles(files)
	for i := range reqs {
		reqs[i].direct = f.a.landsDirect(reqs[i], f.l.fileSize(reqs[i].file))
		if reqs[i].direct {
			st.DirectReads++
		}
		st.ReadBytes += reqs[i].n
	}
	st.Unbuffered, st.Reads = true, len(reqs)
	bounce := o.MergeBytes
	if st.DirectReads == len(reqs) {
		bounce = 0 // every read lands in the arena
	}
	return f.run(ctx, len(reqs), o.Workers, bounce, func(w, i int, buf []byte) error {
		return f.readRequest(files[w][reqs[i].file], buf, reqs[i])
	})
}

// mapped copies the pieces out of the mapping on workers goroutines.
func (f *filler) mapped(ctx context.Context, pieces []piece, workers int) error {
	// Page faults read a little at a time; asking for the pieces a few steps ahead lets
	// the OS read them in large requests while this one is copied.
	ahead := 2 * workers
	for i := range min(ahead, len(pieces)) {
		_ = platform.AdviseWillNeed(f.l.view(pieces[i].src))
	}
	return f.run(ctx, len(pieces), workers, 0, func(_, i int, _ []byte) error {
		if i+ahead < len(pieces) {
			_ = platform.AdviseWillNeed(f.l.view(pieces[i+ahead].src))
		}
		p := pieces[i]
		copy(f.a.mem[p.dst:p.dst+p.src.Len], f.l.view(p.src))
		f.add(p.src.Len)
		return nil
	})
}

// newArena allocates room for ids' blobs; ids must be distinct experts of s.
// ArenaBytes is the size of the arena FillArena allocates for n experts of shape s (blobs
// with their alignment padding), so a caller can budget it before the fill.
func ArenaBytes(s Shape, n int) int64 { return int64(n) * packStride(s) }

func newArena(l *Layout, ids []ID) (*Arena, error) {
	s := l.Shape
	a := &Arena{shape: s, offsets: make([]int64, s.Count()), ids: slices.Clone(ids)}
	for _, id := range ids {
		if id.Layer < 0 || id.Layer >= s.Layers || id.Expert < 0 || id.Expert >= s.Experts {
			return nil, fmt.Errorf("%s is outside the model's %d layers of %d experts", id, s.Layers, s.Experts)
		}
	}
	slices.SortFunc(a.ids, compareIDs)
	for i := 1; i < len(a.ids); i++ {
		if a.ids[i] == a.ids[i-1] {
			return nil, fmt.Errorf("%s is listed twice", a.ids[i])
		}
	}
	for i := range a.offsets {
		a.offsets[i] = -1
	}
	stride := packStride(s)
	a.parts = make([][3]int64, s.Count())
	for i, id := range a.ids {
		a.offsets[s.Index(id)] = int64(i) * stride
		for p, e := range l.Parts(id) {
			a.parts[s.Index(id)][p] = e.Len
		}
	}
	n := ArenaBytes(s, len(a.ids))
	if n == 0 {
		return a, nil
	}
	mem, err := platform.AlignedAlloc(int(n), PackAlign)
	switch {
	case err == nil:
		a.mem, a.aligned = mem, true
		// Before the fill touches a page: faulting 2 MiB pages in takes a fraction of the
		// time 4 KiB ones do, and the CPU's misses read a few MB at random places of it.
		// Only advice: where the kernel has no huge pages the arena works as before.
		_ = platform.AdviseHugePages(mem)
	case errors.Is(err, errors.ErrUnsupported):
		a.mem = make([]byte, n) // systems without aligned allocation: plain memory
	default:
		return nil, fmt.Errorf("arena of %d experts: %w", len(a.ids), err)
	}
	return a, nil
}

func compareIDs(x, y ID) int {
	if c := cmp.Compare(x.Layer, y.Layer); c != 0 {
		return c
	}
	return cmp.Compare(x.Expert, y.Expert)
}

// pieces lists where every part of every blob comes from and goes, sorted by file offset,
// no piece longer than maxLen.
func (a *Arena) pieces(l *Layout, maxLen int64) []piece {
	var out []piece
	for _, id := range a.ids {
		dst := a.offsets[a.shape.Index(id)]
		// Parts that follow each other in the file (an experts.bin blob) are cut as one
		// extent, so every cut lies a multiple of maxLen (itself aligned) past the blob's
		// aligned start and each piece can begin an unbuffered read that lands directly.
		// Cut part by part, a part that starts mid-block would leave every later piece
		// unaligned.
		var ext []Extent
		for _, e := range l.Parts(id) {
			if n := len(ext); n > 0 && ext[n-1].End() == e.Offset {
				ext[n-1].Len += e.Len
				continue
			}
			ext = append(ext, e)
		}
		for _, e := range ext {
			for done := int64(0); done < e.Len; done += maxLen {
				n := min(maxLen, e.Len-done)
				out = append(out, piece{src: Extent{Offset: e.Offset + done, Len: n, File: e.File}, dst: dst + done})
			}
			dst += e.Len
		}
	}
	slices.SortFunc(out, func(x, y piece) int { return compareExtents(x.src, y.src) })
	return out
}

// compareExtents orders extents by file, then offset.
func compareExtents(x, y Extent) int {
	if c := cmp.Compare(x.File, y.File); c != 0 {
		return c
	}
	return cmp.Compare(x.Offset, y.Offset)
}

// mergePieces groups sorted pieces into aligned reads of at most maxBytes, joining
// neighbours separated by holes of up to maxMergeGap.
func mergePieces(pieces []piece, maxBytes int64) []request {
	var out []request
	var cur request
	var end int64 // end of the last piece in cur
	for _, p := range pieces {
		lo, hi := alignDown(p.src.Offset, PackAlign), alignUp(p.src.End(), PackAlign)
		if len(cur.pieces) > 0 && p.src.File == cur.file && p.src.Offset-end <= maxMergeGap && hi-cur.off <= maxBytes {
			cur.pieces = append(cur.pieces, p)
			cur.n = max(cur.n, hi-cur.off)
			end = max(end, p.src.End())
			continue
		}
		if len(cur.pieces) > 0 {
			cur.end = end
			out = append(out, cur)
		}
		cur = request{file: p.src.File, off: lo, n: hi - lo, start: p.src.Offset, pieces: []piece{p}}
		end = p.src.End()
	}
	if len(cur.pieces) > 0 {
		cur.end = end
		out = append(out, cur)
	}
	return out
}

// openProbed opens one unbuffered handle per worker (Windows serialises positioned reads
// on one handle) on each of the layout's files (several for a split GGUF) and checks that
// the first blob reads the same as through an ordinary buffered handle (not the mapping:
// the file may not be mapped yet). It returns the handles, [worker][file], or why the
// unbuffered path cannot be used.
func openProbed(l *Layout, first ID, o FillOptions) ([][]*os.File, string) {
	var files [][]*os.File
	fail := func(reason string) ([][]*os.File, string) {
		closeHandles(files)
		return nil, reason
	}
	for range o.Workers {
		files = append(files, make([]*os.File, 0, l.Files()))
		w := len(files) - 1
		for i := range l.Files() {
			fh, align, err := o.openUnbuffered(l.FilePath(i))
			if err != nil {
				return fail(fmt.Sprintf("unbuffered open failed: %v", err))
			}
			files[w] = append(files[w], fh)
			if PackAlign%align != 0 {
				return fail(fmt.Sprintf("unbuffered reads need %d-byte alignment, above %d", align, PackAlign))
			}
		}
	}
	parts := l.Parts(first)
	var largest int64
	for _, e := range parts {
		largest = max(largest, alignUp(e.Len, PackAlign)+PackAlign)
	}
	buf, err := platform.AlignedAlloc(int(largest), PackAlign)
	if err != nil {
		return fail(fmt.Sprintf("no aligned buffer for the probe read: %v", err))
	}
	defer platform.FreeAligned(buf)
	for p, e := range parts {
		got, err := readDirect(files[0][e.File], buf, e, l)
		if err != nil {
			return fail(fmt.Sprintf("unbuffered read of %s %s failed: %v", first, partName(p), err))
		}
		want := make([]byte, e.Len)
		if err := l.readFile(e.File, want, e.Offset); err != nil {
			return fail(fmt.Sprintf("buffered read of %s %s at offset %d failed: %v", first, partName(p), e.Offset, err))
		}
		if !bytes.Equal(got, want) {
			return fail(fmt.Sprintf("%s %s read unbuffered differs from a buffered read (offset %d, %d bytes)", first, partName(p), e.Offset, e.Len))
		}
	}
	return files, ""
}

// closeHandles closes handles of openProbed.
func closeHandles(files [][]*os.File) {
	for _, fs := range files {
		for _, fh := range fs {
			fh.Close()
		}
	}
}

// readDirect reads extent e through the unbuffered handle fh (on e's file) into the aligned
// buffer buf and returns e's bytes inside it. The part of an aligned read past the last
// whole block of the file comes from the mapping (or a buffered read before l is
// attached) instead: unbuffered reads must not run past the end.
func readDirect(fh *os.File, buf []byte, e Extent, l *Layout) ([]byte, error) {
	lo, hi := alignDown(e.Offset, PackAlign), alignUp(e.End(), PackAlign)
	direct := min(hi, alignDown(l.fileSize(e.File), PackAlign))
	if direct > lo {
		if _, err := fh.ReadAt(buf[:direct-lo], lo); err != nil {
			return nil, err
		}
	}
	if direct < e.End() {
		from := max(direct, e.Offset)
		if err := l.readBuffered(e.File, buf[from-lo:e.End()-lo], from); err != nil {
			return nil, err
		}
	}
	return buf[e.Offset-lo : e.End()-lo], nil
}

// readBuffered fills dst with file's bytes from off: from the mapping when l is attached,
// else with an ordinary read (rare: only the file's last partial block).
func (l *Layout) readBuffered(file int, dst []byte, off int64) error {
	if l.data != nil {
		copy(dst, l.view(Extent{Offset: off, Len: int64(len(dst)), File: file}))
		return nil
	}
	return l.readFile(file, dst, off)
}

// readFile fills dst with file's bytes from off with an ordinary read.
func (l *Layout) readFile(file int, dst []byte, off int64) error {
	fh, err := os.Open(l.FilePath(file))
	if err != nil {
		return err
	}
	defer fh.Close()
	if _, err := fh.ReadAt(dst, off); err != nil {
		return fmt.Errorf("buffered read at offset %d (%d bytes): %w", off, len(dst), err)
	}
	return nil
}

// filler runs a fill's work items on a few goroutines and reports progress.
type filler struct {
	l        *Layout
	a        *Arena
	total    int64
	progress func(done, total int64)

	mu   sync.Mutex
	done int64
}

func (f *filler) add(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done += n
	if f.progress != nil {
		f.progress(f.done, f.total)
	}
}

// readRequest reads one merged request through an unbuffered handle and places its pieces
// in the arena: straight into it when the request allows, else through buf.
func (f *filler) readRequest(fh *os.File, buf []byte, r request) error {
	if r.direct {
		dst := r.pieces[0].dst - (r.pieces[0].src.Offset - r.off)
		if _, err := fh.ReadAt(f.a.mem[dst:dst+r.n], r.off); err != nil {
			return fmt.Errorf("unbuffered read at offset %d (%d bytes): %w", r.off, r.n, err)
		}
		f.add(r.end - r.start - holes(r))
		return nil
	}
	all, err := readDirect(fh, buf, Extent{Offset: r.start, Len: r.end - r.start, File: r.file}, f.l)
	if err != nil {
		return fmt.Errorf("unbuffered read at offset %d (%d bytes): %w", r.off, r.n, err)
	}
	for _, p := range r.pieces {
		s := p.src.Offset - r.start
		copy(f.a.mem[p.dst:p.dst+p.src.Len], all[s:s+p.src.Len])
		f.add(p.src.Len)
	}
	return nil
}

// holes is the bytes of a request between its pieces.
func holes(r request) int64 {
	var n int64
	for i := 1; i < len(r.pieces); i++ {
		n += r.pieces[i].src.Offset - r.pieces[i-1].src.End()
	}
	return n
}

// landsDirect reports whether the aligned read of r can go straight into the arena: it
// starts on an aligned file offset that maps to an aligned arena offset, every piece keeps
// its distance from the first in both, the only bytes between pieces and after the last
// are the padding of blob slots, and the read stays before the file's last partial block.
// experts.bin's aligned blobs satisfy this; a GGUF's stacked tensors rarely do.
func (a *Arena) landsDirect(r request, fileSize int64) bool {
	first := r.pieces[0]
	delta := first.dst - first.src.Offset
	stride, blob := packStride(a.shape), a.shape.BlobBytes()
	blobEnd := func(at int64) bool { return at%stride == blob%stride } // where a blob's padding starts
	if r.start != r.off || (r.off+delta)%PackAlign != 0 || r.off+r.n > alignDown(fileSize, PackAlign) {
		return false
	}
	for i := 1; i < len(r.pieces); i++ {
		p, q := r.pieces[i-1], r.pieces[i]
		if q.dst-q.src.Offset != delta {
			return false
		}
		if gapEnd := p.dst + p.src.Len; q.dst != gapEnd && (!blobEnd(gapEnd) || q.dst != alignUp(gapEnd, stride)) {
			return false
		}
	}
	last := r.pieces[len(r.pieces)-1]
	end := last.dst + last.src.Len
	return r.off+r.n == r.end || (blobEnd(end) && r.off+r.n+delta <= alignUp(end, stride))
}

// run calls work for items 0..n-1 on up to workers goroutines and stops at the first error
// or when ctx ends. With bufBytes > 0 each worker gets an aligned buffer of that size.
func (f *filler) run(ctx context.Context, n, workers int, bufBytes int64, work func(worker, item int, buf []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	for w := range min(workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			if bufBytes > 0 {
				b, err := platform.AlignedAlloc(int(bufBytes), PackAlign)
				if err != nil {
					fail(fmt.Errorf("read buffer: %w", err))
					return
				}
				defer platform.FreeAligned(b)
				buf = b
			}
			for i := range next {
				if err := work(w, i, buf); err != nil {
					fail(err)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// Blob returns id's gate, up and down bytes in the arena; ok is false when id is not here.
func (a *Arena) Blob(id ID) (gate, up, down []byte, ok bool) {
	off, ok := a.Offset(id)
	if !ok {
		return nil, nil, nil, false
	}
	n := a.parts[a.shape.Index(id)]
	g, u := off+n[0], off+n[0]+n[1]
	end := u + n[2]
	return a.mem[off:g:g], a.mem[g:u:u], a.mem[u:end:end], true
}

// blobBytes is the size of the blobs in the arena (padding excluded).
func (a *Arena) blobBytes() int64 {
	var n int64
	for _, id := range a.ids {
		p := a.parts[a.shape.Index(id)]
		n += p[0] + p[1] + p[2]
	}
	return n
}

// Bytes is the whole allocation (for registering it with a GPU driver).
func (a *Arena) Bytes() []byte { return a.mem }

// Offset is where id's blob starts inside Bytes().
func (a *Arena) Offset(id ID) (int64, bool) {
	if a.mem == nil || id.Layer < 0 || id.Layer >= a.shape.Layers || id.Expert < 0 || id.Expert >= a.shape.Experts {
		return 0, false
	}
	off := a.offsets[a.shape.Index(id)]
	return off, off >= 0
}

// IDs lists the experts in the arena in ascending order (shared: do not modify).
func (a *Arena) IDs() []ID { return a.ids }

// Checksum is the hex SHA-256 of the blobs in ascending ID order (padding excluded), so two
// ways of filling the same experts can be compared bit for bit.
func (a *Arena) Checksum() string {
	h := sha256.New()
	for _, id := range a.ids {
		g, u, d, _ := a.Blob(id)
		h.Write(g)
		h.Write(u)
		h.Write(d)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Close unlocks and frees the arena; its slices must not be used afterwards.
func (a *Arena) Close() error {
	mem := a.mem
	a.mem = nil
	if mem == nil {
		return nil
	}
	var errs []error
	if a.locked {
		a.locked = false
		if err := platform.UnlockMemory(mem); err != nil {
			errs = append(errs, err)
		}
	}
	if a.aligned {
		if err := platform.FreeAligned(mem); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("experts: close arena: %w", err)
	}
	return nil
}
