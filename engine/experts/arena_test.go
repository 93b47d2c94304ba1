package experts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine/gguf"
	"strata/platform"
)

// randomIDs picks about frac of the experts of s, in random order.
func randomIDs(rng *rand.Rand, s Shape, frac float64) []ID {
	var ids []ID
	for _, id := range allIDs(s) {
		if rng.Float64() < frac {
			ids = append(ids, id)
		}
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// checkArena compares every blob of the arena with the layout and checks the ones left out.
func checkArena(t *testing.T, a *Arena, l *Layout, ids []ID) {
	t.Helper()
	in := map[ID]bool{}
	for _, id := range ids {
		in[id] = true
	}
	h := sha256.New()
	for _, id := range allIDs(l.Shape) {
		g, u, d, ok := a.Blob(id)
		off, okOff := a.Offset(id)
		if ok != in[id] || okOff != in[id] {
			t.Fatalf("%s: in arena %v/%v, want %v", id, ok, okOff, in[id])
		}
		if !ok {
			continue
		}
		wg, wu, wd := l.Blob(id)
		if !bytes.Equal(g, wg) || !bytes.Equal(u, wu) || !bytes.Equal(d, wd) {
			t.Fatalf("%s: arena bytes differ from the file", id)
		}
		if off%PackAlign != 0 || !bytes.Equal(a.Bytes()[off:off+l.Shape.BlobBytes()], slices.Concat(wg, wu, wd)) {
			t.Fatalf("%s: blob at offset %d of Bytes() is not aligned or not the blob", id, off)
		}
		h.Write(wg)
		h.Write(wu)
		h.Write(wd)
	}
	if got, want := a.Checksum(), hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("checksum %s, want %s", got, want)
	}
}

func TestFillArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for name, path := range testModels(t) {
		f := openGGUF(t, path)
		gl, err := GGUFLayout(f)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := OpenPack(packModel(t, path), f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pl.Close() })
		for _, l := range []*Layout{gl, pl} {
			kind := "gguf"
			if l == pl {
				kind = "pack"
			}
			direct := platform.UnbufferedSupported(l.Path)
			for _, unbuffered := range []bool{true, false} {
				for _, merge := range []int64{0, 1} { // 1 becomes the smallest read: many requests, split parts
					t.Run(name+"/"+kind+"/"+map[bool]string{true: "unbuffered", false: "mapped"}[unbuffered]+map[int64]string{0: "", 1: "/small"}[merge], func(t *testing.T) {
						ids := randomIDs(rng, l.Shape, 0.5)
						if len(ids) == 0 {
							ids = []ID{{0, 0}}
						}
						o := DefaultFillOptions()
						o.Unbuffered, o.MergeBytes, o.Workers = unbuffered, merge, 3
						var last int64
						a, st, err := FillArena(context.Background(), l, ids, o, func(done, total int64) {
							if done < last || done > total {
								t.Errorf("progress %d after %d of %d", done, last, total)
							}
							last = done
						})
						if err != nil {
							t.Fatal(err)
						}
						defer a.Close()
						checkArena(t, a, l, ids)
						want := int64(len(ids)) * l.Shape.BlobBytes()
						if st.Bytes != want || last != want || st.Reads == 0 || st.ReadBytes < want {
							t.Errorf("stats %+v, progress ended at %d, want %d bytes", st, last, want)
						}
						switch {
						case unbuffered && direct && (!st.Unbuffered || st.Fallback != ""):
							t.Errorf("unbuffered reads work here but the fill used the mapping: %q", st.Fallback)
						case unbuffered && !direct && (st.Unbuffered || st.Fallback == ""):
							t.Errorf("unbuffered open fails here but the fill says %+v", st)
						case !unbuffered && (st.Unbuffered || st.Fallback != ""):
							t.Errorf("mapped fill says %+v", st)
						}
					})
				}
			}
		}
	}
}

// TestFillArenaDirect: filling every expert from an experts.bin, every unbuffered read
// lands in the arena without a bounce copy, with small reads (split blobs) and large,
// whatever the GGUF's shapes and alignment: "hand-unaligned" has parts of 10240 bytes, so
// its up and down parts start mid-block and are longer than a small read.
func TestFillArenaDirect(t *testing.T) {
	models := testModels(t)
	models["hand-unaligned"] = handModel{layers: 2, experts: 3, rows: 40, cols: 64, seed: 4}.write(t, filepath.Join(t.TempDir(), "unaligned.gguf"))
	for name, path := range models {
		f := openGGUF(t, path)
		l, err := OpenPack(packModel(t, path), f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if !platform.UnbufferedSupported(l.Path) {
			t.Skipf("%s: no unbuffered reads on this filesystem", l.Path)
		}
		for _, merge := range []int64{1, 0} {
			o := DefaultFillOptions()
			o.MergeBytes = merge
			ids := allIDs(l.Shape)
			a, st, err := FillArena(context.Background(), l, ids, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Unbuffered || st.DirectReads != st.Reads {
				t.Errorf("%s merge %d: %d of %d reads direct (%+v)", name, merge, st.DirectReads, st.Reads, st)
			}
			checkArena(t, a, l, ids)
			a.Close()
		}
	}
}

// TestFillArenaChecksum: the same experts filled both ways and from both layouts give one
// checksum; another set gives another.
func TestFillArenaChecksum(t *testing.T) {
	path := synthModel(t, t.TempDir())
	f := openGGUF(t, path)
	gl, _ := GGUFLayout(f)
	pl, err := OpenPack(packModel(t, path), f)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	ids := []ID{{2, 15}, {0, 3}, {1, 0}, {0, 4}}
	var sums []string
	for _, l := range []*Layout{gl, pl} {
		for _, unbuffered := range []bool{true, false} {
			o := DefaultFillOptions()
			o.Unbuffered = unbuffered
			a, _, err := FillArena(context.Background(), l, ids, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, a.Checksum())
			if got := a.IDs(); !slices.Equal(got, []ID{{0, 3}, {0, 4}, {1, 0}, {2, 15}}) {
				t.Errorf("IDs %v, want ascending", got)
			}
			a.Close()
		}
	}
	for _, s := range sums[1:] {
		if s != sums[0] {
			t.Fatalf("checksums differ: %v", sums)
		}
	}
	a, _, err := FillArena(context.Background(), gl, ids[:3], DefaultFillOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Checksum() == sums[0] {
		t.Error("a different set of experts has the same checksum")
	}
}

func TestFillArenaFallback(t *testing.T) {
	dir := t.TempDir()
	path := handModel{layers: 2, experts: 4, rows: 48, cols: 64, seed: 5}.write(t, filepath.Join(dir, "m.gguf"))
	f := openGGUF(t, path)
	l, _ := GGUFLayout(f)
	// A copy of the file whose first expert differs: what a broken unbuffered read returns.
	raw, _ := os.ReadFile(path)
	raw[l.Parts(ID{0, 1})[1].Offset+100] ^= 0x55
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		open func(string) (*os.File, int, error)
		want string
	}{
		{"open fails", func(p string) (*os.File, int, error) {
			return nil, 0, errors.New("open unbuffered " + p + ": invalid argument")
		}, "unbuffered open failed: open unbuffered " + path},
		{"reads differ", func(string) (*os.File, int, error) {
			fh, err := os.Open(bad)
			return fh, PackAlign, err
		}, "layer 0 expert 1 up read unbuffered differs from a buffered read"},
		{"odd alignment", func(p string) (*os.File, int, error) {
			fh, err := os.Open(p)
			return fh, 3 * PackAlign, err
		}, "alignment"},
	}
	ids := []ID{{0, 1}, {1, 2}, {1, 3}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultFillOptions()
			o.openUnbuffered = c.open
			a, st, err := FillArena(context.Background(), l, ids, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if st.Unbuffered || !strings.Contains(st.Fallback, c.want) {
				t.Errorf("stats %+v, want a fallback saying %q", st, c.want)
			}
			checkArena(t, a, l, ids)
		})
	}
	// A buffered handle that reads the right bytes passes the probe and is used.
	o := DefaultFillOptions()
	o.openUnbuffered = func(p string) (*os.File, int, error) { fh, err := os.Open(p); return fh, PackAlign, err }
	a, st, err := FillArena(context.Background(), l, ids, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !st.Unbuffered || st.Fallback != "" {
		t.Errorf("stats %+v, want the injected reader used", st)
	}
	checkArena(t, a, l, ids)
}

func TestFillArenaCancel(t *testing.T) {
	path := synthModel(t, t.TempDir())
	l, _ := GGUFLayout(openGGUF(t, path))
	ids := allIDs(l.Shape)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, unbuffered := range []bool{true, false} {
		o := DefaultFillOptions()
		o.Unbuffered = unbuffered
		if a, _, err := FillArena(ctx, l, ids, o, nil); !errors.Is(err, context.Canceled) || a != nil {
			t.Errorf("unbuffered %v, cancelled before: arena %v, error %v", unbuffered, a, err)
		}
		// Cancelled from the first progress report: the fill stops early.
		ctx, cancel := context.WithCancel(context.Background())
		var calls int
		o.MergeBytes, o.Workers = 1, 1
		a, _, err := FillArena(ctx, l, ids, o, func(done, total int64) {
			calls++
			cancel()
		})
		if !errors.Is(err, context.Canceled) || a != nil {
			t.Errorf("unbuffered %v, cancelled during: arena %v, error %v", unbuffered, a, err)
		}
		if calls >= 3*len(ids) {
			t.Errorf("unbuffered %v: %d progress calls after cancelling, the fill did not stop", unbuffered, calls)
		}
	}
}

func TestFillArenaErrors(t *testing.T) {
	path := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 1}.write(t, filepath.Join(t.TempDir(), "m.gguf"))
	l, _ := GGUFLayout(openGGUF(t, path))
	for _, c := range []struct {
		ids  []ID
		want string
	}{
		{[]ID{{0, 1}, {0, 1}}, "layer 0 expert 1 is listed twice"},
		{[]ID{{2, 0}}, "layer 2 expert 0 is outside"},
		{[]ID{{0, -1}}, "outside"},
	} {
		a, _, err := FillArena(context.Background(), l, c.ids, DefaultFillOptions(), nil)
		if err == nil || a != nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%v: error %v, want %q naming the file", c.ids, err, c.want)
		}
	}
	// No experts: an empty arena.
	a, st, err := FillArena(context.Background(), l, nil, DefaultFillOptions(), nil)
	if err != nil || len(a.Bytes()) != 0 || st.Bytes != 0 {
		t.Errorf("empty fill: %v, %d bytes, %+v", err, len(a.Bytes()), st)
	}
	if _, ok := a.Offset(ID{0, 0}); ok {
		t.Error("an empty arena has an expert")
	}
	a.Close()
	pl, err := OpenPack(packModel(t, path), openGGUF(t, path))
	if err != nil {
		t.Fatal(err)
	}
	pl.Close()
	if _, _, err := FillArena(context.Background(), pl, []ID{{0, 0}}, DefaultFillOptions(), nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("fill from a closed layout: %v", err)
	}
}

func TestFillArenaLock(t *testing.T) {
	path := handModel{layers: 2, experts: 4, rows: 48, cols: 64, seed: 1}.write(t, filepath.Join(t.TempDir(), "m.gguf"))
	l, _ := GGUFLayout(openGGUF(t, path))
	o := DefaultFillOptions()
	o.Lock = true
	a, st, err := FillArena(context.Background(), l, allIDs(l.Shape), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Locking may be refused (RLIMIT_MEMLOCK, a Windows quota); then it must say why.
	if st.Locked == (st.LockError != "") {
		t.Errorf("locked %v with error %q", st.Locked, st.LockError)
	}
	checkArena(t, a, l, allIDs(l.Shape))
	if err := a.Close(); err != nil {
		t.Error(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMergePieces(t *testing.T) {
	const mb = 64 << 10
	pieces := []piece{
		{Extent{Offset: 100, Len: 50}, 0},                       // joins the next: hole below maxMergeGap
		{Extent{Offset: 1000, Len: 5000}, 4096},                 //
		{Extent{Offset: 6000 + maxMergeGap + 1, Len: 10}, 9000}, // too far: a new request
		{Extent{Offset: 274000, Len: 60000}, 12000},             // close, but the read would pass 64 KiB
	}
	reqs := mergePieces(pieces, mb)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3: %+v", len(reqs), reqs)
	}
	var n int
	for _, r := range reqs {
		if r.off%PackAlign != 0 || r.n%PackAlign != 0 || r.n > mb {
			t.Errorf("request %+v is not aligned or larger than %d", r, mb)
		}
		for _, p := range r.pieces {
			if p.src.Offset < r.off || p.src.End() > r.off+r.n {
				t.Errorf("piece %+v outside its request %d+%d", p, r.off, r.n)
			}
			n++
		}
	}
	if n != len(pieces) || len(reqs[0].pieces) != 2 || len(reqs[1].pieces) != 1 {
		t.Errorf("pieces spread %d, %d, %d", len(reqs[0].pieces), len(reqs[1].pieces), len(reqs[2].pieces))
	}
}

// openUnmappedLayout opens path without mapping it and builds its GGUF layout.
func openUnmappedLayout(t *testing.T, path string) (*gguf.File, *Layout) {
	t.Helper()
	f, err := gguf.OpenUnmapped(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l, err := GGUFLayout(f)
	if err != nil {
		t.Fatal(err)
	}
	if l.Attached() || f.Mapped() {
		t.Fatalf("%s: the layout of an unmapped file is attached (%v) or the file mapped (%v)", path, l.Attached(), f.Mapped())
	}
	if g, u, d := l.Blob(ID{0, 0}); g != nil || u != nil || d != nil {
		t.Fatal("Blob has views before Attach")
	}
	return f, l
}

// TestFillArenaUnmapped fills arenas from GGUF files that are not mapped: unbuffered reads
// leave the file unmapped; the fallback and the mapped fill map it first. Every way gives the
// arena a fill from the mapped file gives.
func TestFillArenaUnmapped(t *testing.T) {
	buffered := func(p string) (*os.File, int, error) { fh, err := os.Open(p); return fh, PackAlign, err }
	failing := func(p string) (*os.File, int, error) { return nil, 0, errors.New("open unbuffered " + p + ": refused") }
	rng := rand.New(rand.NewPCG(5, 6))
	for name, path := range testModels(t) {
		ref, err := GGUFLayout(openGGUF(t, path))
		if err != nil {
			t.Fatal(err)
		}
		ids := randomIDs(rng, ref.Shape, 0.5)
		ids = append(ids, ID{ref.Shape.Layers - 1, ref.Shape.Experts - 1}) // the file's last bytes, in the hand-made models
		ids = slices.Compact(slices.SortedFunc(slices.Values(ids), compareIDs))
		o := DefaultFillOptions()
		o.Unbuffered = false
		want, _, err := FillArena(context.Background(), ref, ids, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantSum := want.Checksum()
		want.Close()
		for _, c := range []struct {
			way        string
			unbuffered bool
			open       func(string) (*os.File, int, error) // nil: the platform's
			fallback   string
		}{
			{"unbuffered", true, nil, ""},
			{"read", true, buffered, ""}, // where the filesystem refuses unbuffered reads
			{"fallback", true, failing, "unbuffered open failed"},
			{"mapped", false, nil, ""},
		} {
			t.Run(name+"/"+c.way, func(t *testing.T) {
				if c.way == "unbuffered" && !platform.UnbufferedSupported(path) {
					t.Skipf("%s: no unbuffered reads on this filesystem (the read case covers the path)", path)
				}
				f, l := openUnmappedLayout(t, path)
				o := DefaultFillOptions()
				o.Unbuffered, o.MergeBytes = c.unbuffered, 1 // small reads: many requests, split parts
				o.openUnbuffered = c.open
				a, st, err := FillArena(context.Background(), l, ids, o, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				if got := a.Checksum(); got != wantSum {
					t.Errorf("checksum %s, the mapped file's fill gives %s", got, wantSum)
				}
				viaMapping := !c.unbuffered || c.fallback != ""
				if st.Unmapped == viaMapping || st.Unbuffered == viaMapping || f.Mapped() != viaMapping || l.Attached() != viaMapping ||
					!strings.Contains(st.Fallback, c.fallback) || (c.fallback == "") != (st.Fallback == "") {
					t.Errorf("stats %+v; file mapped %v, layout attached %v after the fill", st, f.Mapped(), l.Attached())
				}
				if err := l.Attach(); err != nil {
					t.Fatal(err)
				}
				checkArena(t, a, l, ids)
			})
		}
	}
}

func TestAttachErrors(t *testing.T) {
	path := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 1}.write(t, filepath.Join(t.TempDir(), "m.gguf"))
	_, l := openUnmappedLayout(t, path)
	l.Close()
	if err := l.Attach(); err == nil || !strings.Contains(err.Error(), "closed") || !strings.Contains(err.Error(), path) {
		t.Errorf("Attach after Close: %v", err)
	}
	if _, _, err := FillArena(context.Background(), l, []ID{{0, 0}}, DefaultFillOptions(), nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("fill from a closed unmapped layout: %v", err)
	}
	// The file changed between the header read and the fallback's map: a clear error.
	f, l2 := openUnmappedLayout(t, path)
	if err := os.Truncate(path, f.Size()-1); err != nil {
		t.Fatal(err)
	}
	o := DefaultFillOptions()
	o.Unbuffered = false
	if _, _, err := FillArena(context.Background(), l2, []ID{{0, 0}}, o, nil); err == nil || !strings.Contains(err.Error(), "changed") || !strings.Contains(err.Error(), path) {
		t.Errorf("mapped fill of a changed file: %v", err)
	}
}
