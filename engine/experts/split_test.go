package experts

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"strata/engine/gguf"
	"strata/platform"
)

// splitModel writes the model at path as three parts and returns the first part's path.
func splitModel(t *testing.T, path string) string {
	t.Helper()
	f := openGGUF(t, path)
	parts, err := gguf.WriteSplit(f, filepath.Join(t.TempDir(), "split"), 3)
	if err != nil {
		t.Fatal(err)
	}
	return parts[0]
}

// TestSplitGGUFLayout: the layout of a model split in three points every expert at the part
// that holds its tensors; its blobs, cold reads, an arena filled from it (unbuffered, each
// read on its part's handle, where the filesystem allows) and the dropped pages are those
// of the single file.
func TestSplitGGUFLayout(t *testing.T) {
	path := synthModel(t, t.TempDir())
	whole := openGGUF(t, path)
	wl, err := GGUFLayout(whole)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := gguf.OpenUnmapped(splitModel(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	l, err := GGUFLayout(sf)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Files() != 3 || l.Shape != wl.Shape {
		t.Fatalf("%d files, shape %+v; whole %+v", l.Files(), l.Shape, wl.Shape)
	}
	raws := make([][]byte, l.Files())
	for i := range raws {
		if raws[i], err = os.ReadFile(l.FilePath(i)); err != nil {
			t.Fatal(err)
		}
	}
	files := map[int]bool{}
	for _, id := range allIDs(l.Shape) {
		want := wantBlob(t, whole, id)
		for p, e := range l.Parts(id) {
			files[e.File] = true
			if !bytes.Equal(raws[e.File][e.Offset:e.End()], want[p]) {
				t.Fatalf("%s %s: extent %+v does not hold the part in %s", id, partName(p), e, l.FilePath(e.File))
			}
		}
	}
	if len(files) < 2 {
		t.Errorf("the experts lie in %d of the 3 parts", len(files))
	}
	ids := allIDs(l.Shape)
	unbuffered := platform.UnbufferedSupported(l.FilePath(0))
	cr, why := NewColdReader(l, ID{0, 0}, 2)
	if (cr != nil) != unbuffered {
		t.Fatalf("cold reader: %v (%q); unbuffered reads work here: %v", cr != nil, why, unbuffered)
	}
	if cr != nil {
		got, err := cr.Read(ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			want := wantBlob(t, whole, id)
			for p := range want {
				if !bytes.Equal(got[i][p], want[p]) {
					t.Fatalf("cold read of %s %s differs from the tensor", id, partName(p))
				}
			}
		}
		if err := cr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	o := DefaultFillOptions()
	o.Unbuffered = true
	a, st, err := FillArena(context.Background(), l, ids, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st.Unbuffered != unbuffered || (unbuffered && (st.Fallback != "" || !st.Unmapped)) {
		t.Errorf("fill: unbuffered %v, unmapped %v, fallback %q; unbuffered reads work here: %v", st.Unbuffered, st.Unmapped, st.Fallback, unbuffered)
	}
	if err := l.Attach(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		g, u, d, ok := a.Blob(id)
		want := wantBlob(t, whole, id)
		if !ok || !bytes.Equal(g, want[0]) || !bytes.Equal(u, want[1]) || !bytes.Equal(d, want[2]) {
			t.Fatalf("%s: arena bytes differ from the tensors", id)
		}
		g, u, d = l.Blob(id)
		if !bytes.Equal(g, want[0]) || !bytes.Equal(u, want[1]) || !bytes.Equal(d, want[2]) {
			t.Fatalf("%s: blob bytes differ from the tensors", id)
		}
	}
	// Dropping pages: every advised byte is one of the experts', in whichever part.
	var r recorder
	few := []ID{ids[0], ids[1], ids[len(ids)/2], ids[len(ids)-1]} // experts in different parts
	if err := dropPages(l, few, 4096, r.advise); err != nil {
		t.Fatal(err)
	}
	inside := map[uintptr]bool{}
	for _, id := range few {
		g, u, d := l.Blob(id)
		for _, b := range [][]byte{g, u, d} {
			for i := range b {
				inside[addr(b)+uintptr(i)] = true
			}
		}
	}
	if len(r.got) == 0 {
		t.Fatal("no pages dropped")
	}
	for _, b := range r.got {
		for i := range b {
			if !inside[addr(b)+uintptr(i)] {
				t.Fatalf("dropped byte %#x is not one of the experts'", addr(b)+uintptr(i))
			}
		}
	}
}
