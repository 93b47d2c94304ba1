package experts

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"strata/engine/gguf"
	"strata/platform"
)

// packModel packs the model at path into a new folder, checking the progress calls, and
// returns the path of experts.bin.
func packModel(t *testing.T, path string) string {
	t.Helper()
	f := openGGUF(t, path)
	var calls int
	var last, total int64
	out, err := Pack(context.Background(), f, t.TempDir(), func(done, tot int64) {
		if done < last || done > tot {
			t.Errorf("progress went from %d to %d of %d", last, done, tot)
		}
		calls++
		last, total = done, tot
	})
	if err != nil {
		t.Fatal(err)
	}
	src, err := GGUFLayout(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(src.Shape.Count()) * src.Shape.BlobBytes(); calls == 0 || last != want || total != want {
		t.Errorf("progress ended at %d of %d after %d calls, want %d", last, total, calls, want)
	}
	if filepath.Base(out) != PackFile {
		t.Errorf("packed to %s", out)
	}
	return out
}

func TestPackMatchesGGUF(t *testing.T) {
	for name, path := range testModels(t) {
		t.Run(name, func(t *testing.T) {
			out := packModel(t, path)
			f := openGGUF(t, path)
			l, err := OpenPack(out, f)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			src, _ := GGUFLayout(f)
			if l.Shape != src.Shape || l.Path != out {
				t.Fatalf("shape %+v path %s, want %+v %s", l.Shape, l.Path, src.Shape, out)
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw)%PackAlign != 0 || l.FileSize() != int64(len(raw)) {
				t.Errorf("file of %d bytes (layout says %d) is not whole %d-byte blocks", len(raw), l.FileSize(), PackAlign)
			}
			prevEnd := int64(0)
			for _, id := range allIDs(l.Shape) {
				p := l.Parts(id)
				if p[0].Offset%PackAlign != 0 || p[0].Offset < prevEnd {
					t.Fatalf("%s starts at %d (previous blob ends at %d)", id, p[0].Offset, prevEnd)
				}
				if p[1].Offset != p[0].End() || p[2].Offset != p[1].End() {
					t.Fatalf("%s parts are not contiguous: %+v", id, p)
				}
				prevEnd = p[2].End()
				want := wantBlob(t, f, id)
				g, u, d := l.Blob(id)
				for i, got := range [3][]byte{g, u, d} {
					if !bytes.Equal(got, want[i]) || !bytes.Equal(raw[p[i].Offset:p[i].End()], want[i]) {
						t.Fatalf("%s %s: packed bytes differ from the GGUF", id, partName(i))
					}
				}
			}
			if err := l.Close(); err != nil {
				t.Error(err)
			}
			if g, _, _ := l.Blob(ID{0, 0}); g != nil {
				t.Error("Blob returned bytes after Close")
			}
		})
	}
}

func TestFindPack(t *testing.T) {
	dir := t.TempDir()
	a := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 1}.write(t, filepath.Join(dir, "a.gguf"))
	fa := openGGUF(t, a)
	if l, ok := FindPack(fa); ok || l != nil {
		t.Fatal("found a pack in a folder without one")
	}
	if _, err := Pack(context.Background(), fa, dir, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, PackFile)); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o644) {
		t.Errorf("experts.bin: %v, mode %v, want 0644", err, st.Mode())
	}
	l, ok := FindPack(fa)
	if !ok {
		t.Fatal("the pack next to the model was not used")
	}
	want := wantBlob(t, fa, ID{1, 3})
	if _, _, d := l.Blob(ID{1, 3}); !bytes.Equal(d, want[2]) {
		t.Error("FindPack's layout has the wrong bytes")
	}
	l.Close()
	// Another model in the same folder (other weights) must not use a's pack.
	b := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 2}.write(t, filepath.Join(dir, "b.gguf"))
	if _, ok := FindPack(openGGUF(t, b)); ok {
		t.Error("a pack of another model was used")
	}
	// No temporary files are left behind.
	names, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(names) > 0 {
		t.Errorf("left behind: %v", names)
	}
}

func TestOpenPackErrors(t *testing.T) {
	dir := t.TempDir()
	m := handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 1}
	path := m.write(t, filepath.Join(dir, "m.gguf"))
	f := openGGUF(t, path)
	good, err := Pack(context.Background(), f, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Models the pack is not for: other weights with the same tensor index, and another
	// tensor index.
	sameIndex := openGGUF(t, handModel{layers: 2, experts: 4, rows: 3, cols: 5, seed: 9}.write(t, filepath.Join(dir, "same.gguf")))
	other := openGGUF(t, handModel{layers: 2, experts: 4, rows: 5, cols: 5, seed: 1}.write(t, filepath.Join(dir, "other.gguf")))
	src, _ := GGUFLayout(f)
	// A header with the right key but another shape (and a valid checksum).
	wrongShape := func([]byte) []byte {
		s := src.Shape
		s.Experts = 2
		h := newPackHeader(ModelKey(f), s)
		return append(h.encode(), make([]byte, h.fileSize-h.dataStart)...)
	}
	firstBlob := newPackHeader(ModelKey(f), src.Shape).dataStart
	le := binary.LittleEndian
	cases := []struct {
		name   string
		edit   func([]byte) []byte
		model  *gguf.File
		want   string
		offset int64
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-PackAlign] }, nil, "truncated", 72},
		{"too short", func(b []byte) []byte { return b[:20] }, nil, "too short", -1},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, nil, "not an experts.bin", 0},
		{"version", func(b []byte) []byte { le.PutUint32(b[8:], 99); return b }, nil, "format version 99", 8},
		{"corrupt index", func(b []byte) []byte { b[packFixed+40] ^= 1; return b }, nil, "checksum", -2},
		{"blob changed", func(b []byte) []byte { b[firstBlob] ^= 0xff; return b }, nil, "differ", firstBlob},
		{"wrong shape", wrongShape, nil, "expert shape", 16},
		{"same index, other weights", nil, sameIndex, "differ", firstBlob},
		{"other model", nil, other, "another model", packFixed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), PackFile)
			b := bytes.Clone(orig)
			if c.edit != nil {
				b = c.edit(b)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			g := f
			if c.model != nil {
				g = c.model
			}
			l, err := OpenPack(p, g)
			var pe *PackError
			if err == nil || !errors.As(err, &pe) {
				l.Close()
				t.Fatalf("error %v, want a *PackError", err)
			}
			if pe.Path != p || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to name %s and say %q", err, p, c.want)
			}
			if c.offset != -2 && pe.Offset != c.offset {
				t.Errorf("error at byte %d, want %d", pe.Offset, c.offset)
			}
		})
	}
}

// TestOpenPackUnmapped: for a model opened unmapped, OpenPack checks experts.bin with
// ordinary reads and maps neither file: a matching pack is accepted and stays unattached
// until Attach, an unbuffered fill from it leaves both files unmapped and gives the
// GGUF's arena; a stale pack (other weights, same index) and a truncated one are refused
// with the PackErrors of a mapped model; Attach refuses a file that changed size.
func TestOpenPackUnmapped(t *testing.T) {
	dir := t.TempDir()
	path := synthModel(t, dir)
	packed := packModel(t, path)
	openUnmapped := func(path string) *gguf.File {
		f, err := gguf.OpenUnmapped(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	f := openUnmapped(path)
	l, err := OpenPack(packed, f)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Attached() || f.Mapped() {
		t.Fatalf("after OpenPack: pack attached %v, model mapped %v; want neither", l.Attached(), f.Mapped())
	}
	if g, _, _ := l.Blob(ID{0, 0}); g != nil {
		t.Error("Blob gave bytes before Attach")
	}
	ids := []ID{{0, 1}, {1, 15}, {2, 7}, {2, 0}}
	gl, err := GGUFLayout(f)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, src := range []*Layout{l, gl} {
		a, st, err := FillArena(context.Background(), src, ids, DefaultFillOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, a.Checksum())
		a.Close()
		if direct := platform.UnbufferedSupported(src.Path); st.Unmapped != direct || src.Attached() || f.Mapped() {
			t.Errorf("%s: unbuffered reads work: %v; fill says unmapped %v; attached %v, model mapped %v", src.Path, direct, st.Unmapped, src.Attached(), f.Mapped())
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("arena from experts.bin %s, from the GGUF %s", sums[0], sums[1])
	}
	// A fill through the mapping attaches the pack; its views are the model's bytes.
	o := DefaultFillOptions()
	o.Unbuffered = false
	a, st, err := FillArena(context.Background(), l, ids, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Checksum() != sums[1] || st.Unmapped || !l.Attached() || f.Mapped() {
		t.Errorf("mapped fill: checksum %s (want %s), unmapped %v, pack attached %v, model mapped %v", a.Checksum(), sums[1], st.Unmapped, l.Attached(), f.Mapped())
	}
	a.Close()
	want := wantBlob(t, openGGUF(t, path), ID{2, 7})
	if g, u, d := l.Blob(ID{2, 7}); !bytes.Equal(g, want[0]) || !bytes.Equal(u, want[1]) || !bytes.Equal(d, want[2]) {
		t.Error("the attached pack's views differ from the model's bytes")
	}

	raw, err := os.ReadFile(packed)
	if err != nil {
		t.Fatal(err)
	}
	firstBlob := l.Parts(ID{0, 0})[0].Offset
	stale := synthModelSeed(t, t.TempDir(), 9)
	for _, c := range []struct {
		name   string
		pack   []byte
		model  string
		want   string
		offset int64
	}{
		{"stale", raw, stale, "differ", firstBlob},
		{"truncated", raw[:len(raw)-PackAlign], path, "truncated", 72},
		{"header only", raw[:firstBlob], path, "truncated", 72},
	} {
		p := filepath.Join(t.TempDir(), PackFile)
		if err := os.WriteFile(p, c.pack, 0o644); err != nil {
			t.Fatal(err)
		}
		m := openUnmapped(c.model)
		got, err := OpenPack(p, m)
		var pe *PackError
		if !errors.As(err, &pe) || pe.Path != p || pe.Offset != c.offset || !strings.Contains(err.Error(), c.want) {
			if got != nil {
				got.Close()
			}
			t.Errorf("%s: error %v, want a PackError for %s at byte %d saying %q", c.name, err, p, c.offset, c.want)
		}
		if m.Mapped() {
			t.Errorf("%s: OpenPack mapped the model", c.name)
		}
	}

	// experts.bin rewritten to another size after the check: Attach refuses it.
	p := filepath.Join(t.TempDir(), PackFile)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenPack(p, f)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := os.WriteFile(p, raw[:len(raw)-PackAlign], 0o644); err != nil {
		t.Fatal(err)
	}
	var pe *PackError
	if err := l2.Attach(); !errors.As(err, &pe) || pe.Path != p || !strings.Contains(err.Error(), "when it was checked") || l2.Attached() {
		t.Errorf("Attach after the file shrank: %v (attached %v)", err, l2.Attached())
	}
}

func TestPackCancelled(t *testing.T) {
	path := synthModel(t, t.TempDir())
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var calls int
	_, err := Pack(ctx, openGGUF(t, path), dir, func(done, total int64) {
		calls++
		cancel()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("error %v after %d progress calls, want context.Canceled after 1", err, calls)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("a cancelled pack left %v", names)
	}
	if _, err := Pack(context.Background(), openGGUF(t, path), filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("packing into a missing folder gave no error")
	}
}

// FuzzPackHeader: any bytes give a header or an error, never a panic, and a header that
// decodes is self-consistent.
func FuzzPackHeader(f *testing.F) {
	s := Shape{Layers: 2, Experts: 3, GateBytes: 100, UpBytes: 100, DownBytes: 50}
	h := newPackHeader("0123456789abcdef", s)
	valid := append(h.encode(), make([]byte, h.fileSize-h.dataStart)...)
	f.Add(valid)
	f.Add(valid[:packFixed])
	f.Add([]byte(packMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodePackHeader("fuzz", data, int64(len(data)))
		if err != nil {
			return
		}
		blob := got.shape.BlobBytes()
		for i, o := range got.offsets {
			if o%PackAlign != 0 || o < got.dataStart || o+blob > int64(len(data)) || (i > 0 && o < got.offsets[i-1]+blob) {
				t.Fatalf("blob %d at %d accepted (data from %d, %d bytes)", i, o, got.dataStart, len(data))
			}
		}
	})
}
