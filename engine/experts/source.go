package experts

import (
	"fmt"
	"os"

	"strata/engine/gguf"
	"strata/engine/model"
	"strata/platform"
)

// Extent is a run of bytes of one file: file File of the layout (0 but for the other parts
// of a split GGUF, gguf.File.Part).
type Extent struct {
	Offset, Len int64
	File        int
}

// End is the offset just past the extent.
func (e Extent) End() int64 { return e.Offset + e.Len }

// Layout says where every expert's bytes are: the GGUF in place (stacked tensors; in
// several files for a split GGUF, each tensor in its own) or an experts.bin written by Pack
// (one aligned blob per expert). Path, data, base and size are those of the first (or only)
// file; more holds the other parts of a split GGUF.
type Layout struct {
	Path  string
	Shape Shape
	more  []layoutFile

	parts [][3]Extent // by Shape.Index: gate, up, down file extents
	data  []byte      // the read-only mapping, starting at file offset base; nil until attached
	base  int64
	size  int64        // the file's size
	unmap func() error // nil when the mapping belongs to someone else (a gguf.File)
	mixed bool         // layers' experts differ in size (a quantisation mix)

	gguf   *gguf.File // the file a GGUF layout borrows its mapping from (nil for experts.bin, which Attach maps itself)
	closed bool
}

// layoutFile is a further file of a split GGUF layout: its path, its data section's mapping
// (nil until attached) starting at file offset base, and its size.
type layoutFile struct {
	path       string
	data       []byte
	base, size int64
}

// GGUFLayout finds the experts of a GGUF file's stacked tensors
// blk.L.ffn_{gate,up,down}_exps.weight: expert e of a stacked tensor is bytes
// [e*size/E, (e+1)*size/E) of it. Layers may store their experts in different types. The
// layout borrows f's mapping: it is valid while f is open, and its Close does not close f.
// f may be unmapped (gguf.OpenUnmapped): the layout's extents work at once, so FillArena can
// read the experts around the page cache with no mapping of the file; Blob's views need
// Attach, which maps f.
func GGUFLayout(f *gguf.File) (*Layout, error) {
	layers, err := f.ArchUint("block_count")
	if err != nil {
		return nil, fmt.Errorf("experts: %w", err)
	}
	experts, err := f.ArchUint("expert_count")
	if err != nil {
		return nil, fmt.Errorf("experts: %w", err)
	}
	if layers == 0 || experts == 0 || layers > 1<<16 || experts > 1<<16 {
		return nil, fmt.Errorf("experts: %s: %d layers of %d experts is not a MoE model this code can place", f.Path, layers, experts)
	}
	l := &Layout{
		Path:  f.Path,
		Shape: Shape{Layers: int(layers), Experts: int(experts)},
		data:  f.Mapping(),
		base:  f.DataOffset,
		size:  f.Size(),
		gguf:  f,
	}
	for i := 1; i < f.PartCount(); i++ {
		p := f.Part(i)
		l.more = append(l.more, layoutFile{path: p.Path, data: p.Mapping(), base: p.DataOffset, size: p.Size()})
	}
	E := int64(experts)
	l.parts = make([][3]Extent, l.Shape.Count())
	for layer := range l.Shape.Layers {
		var sizes [3]int64
		for p, name := range model.ExpertTensors(layer) {
			t, ok := f.Tensor(name)
			if !ok {
				return nil, fmt.Errorf("experts: %s: tensor %q is missing", f.Path, name)
			}
			if len(t.Ne) != 3 || t.Ne[2] != E {
				return nil, fmt.Errorf("experts: %s: tensor %q has shape %v, want 3 dimensions with %d experts last", f.Path, name, t.Ne, E)
			}
			if t.Size <= 0 || t.Size%E != 0 {
				return nil, fmt.Errorf("experts: %s: tensor %q: %d bytes do not split into %d experts", f.Path, name, t.Size, E)
			}
			part := f.Part(t.Part)
			if part == nil || t.Offset < 0 || t.Size > part.Size()-part.DataOffset-t.Offset {
				return nil, fmt.Errorf("experts: %s: tensor %q at data offset %d (%d bytes) of part %d is outside the file", f.Path, name, t.Offset, t.Size, t.Part+1)
			}
			sizes[p] = t.Size / E
			start := part.DataOffset + t.Offset
			for e := range int(E) {
				l.parts[l.Shape.Index(ID{layer, e})][p] = Extent{Offset: start + int64(e)*sizes[p], Len: sizes[p], File: t.Part}
			}
		}
		// Quantisation mixes store some layers' experts in a wider type: the shape keeps the
		// widest of each matrix, so one stride fits every layer, and the parts keep each
		// layer's own sizes.
		if layer > 0 && sizes != [3]int64{l.Shape.GateBytes, l.Shape.UpBytes, l.Shape.DownBytes} {
			l.mixed = true
		}
		l.Shape.GateBytes = max(l.Shape.GateBytes, sizes[0])
		l.Shape.UpBytes = max(l.Shape.UpBytes, sizes[1])
		l.Shape.DownBytes = max(l.Shape.DownBytes, sizes[2])
	}
	return l, nil
}

// valid reports whether id is an expert of the layout.
func (l *Layout) valid(id ID) bool {
	return id.Layer >= 0 && id.Layer < l.Shape.Layers && id.Expert >= 0 && id.Expert < l.Shape.Experts
}

// Parts returns the file extents of id's gate, up and down matrices (in l.Path, or the part
// FilePath(e.File) of a split GGUF); zero extents for an id outside the model.
func (l *Layout) Parts(id ID) [3]Extent {
	if !l.valid(id) {
		return [3]Extent{}
	}
	return l.parts[l.Shape.Index(id)]
}

// Attach gives a layout of an unmapped file its views: a GGUF layout maps its model
// (gguf.File.Map) and takes the mapping; an experts.bin layout maps experts.bin read-only,
// refusing a file whose size changed since OpenPack checked it. It does nothing for a
// layout that has them. It must not run while another goroutine uses the layout's views.
func (l *Layout) Attach() error {
	switch {
	case l.data != nil:
		return nil
	case l.closed:
		return fmt.Errorf("experts: attach %s: the layout is closed", l.Path)
	case l.gguf == nil:
		return l.mapPack()
	}
	if err := l.gguf.Map(); err != nil {
		return fmt.Errorf("experts: attach %s: %w", l.Path, err)
	}
	// A data section of zero bytes has no mapping to take; such a file has no experts.
	l.data = l.gguf.Mapping()
	for i := range l.more {
		l.more[i].data = l.gguf.Part(i + 1).Mapping()
	}
	return nil
}

// mapPack maps the experts.bin of the layout, which it then owns (Close unmaps it).
func (l *Layout) mapPack() error {
	fh, err := os.Open(l.Path)
	if err != nil {
		return fmt.Errorf("experts: attach: %w", err)
	}
	defer fh.Close() // the mapping outlives the descriptor
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("experts: attach: %w", err)
	}
	if st.Size() != l.size {
		return &PackError{Path: l.Path, Offset: -1, Msg: fmt.Sprintf("the file has %d bytes, %d when it was checked (rewritten since?)", st.Size(), l.size)}
	}
	data, unmap, err := platform.MapReadOnly(fh, l.size)
	if err != nil {
		return fmt.Errorf("experts: attach %s: %w", l.Path, err)
	}
	l.data, l.base, l.unmap = data, 0, unmap
	return nil
}

// Attached reports whether the layout has views of its file (Blob works).
func (l *Layout) Attached() bool { return l.data != nil }

// Blob returns id's gate, up and down bytes as views of the read-only mapping (do not
// write them; they are invalid after Close). They are nil for an id outside the model,
// before Attach (a layout of an unmapped GGUF, or an experts.bin opened for one) and after
// Close.
func (l *Layout) Blob(id ID) (gate, up, down []byte) {
	if !l.valid(id) || l.data == nil {
		return nil, nil, nil
	}
	p := l.parts[l.Shape.Index(id)]
	return l.view(p[0]), l.view(p[1]), l.view(p[2])
}

// view is the mapped bytes of a file extent (checked against the mapping when the layout
// was built).
func (l *Layout) view(e Extent) []byte {
	data, base := l.mapped(e.File)
	s := e.Offset - base
	return data[s : s+e.Len : s+e.Len]
}

// mapped is file i's mapping and the file offset it starts at.
func (l *Layout) mapped(i int) ([]byte, int64) {
	if i == 0 {
		return l.data, l.base
	}
	return l.more[i-1].data, l.more[i-1].base
}

// fileSize is the size of file i of the layout.
func (l *Layout) fileSize(i int) int64 {
	if i <= 0 || i > len(l.more) {
		return l.size
	}
	return l.more[i-1].size
}

// Files is how many files the layout reads: more than 1 for a split GGUF.
func (l *Layout) Files() int { return 1 + len(l.more) }

// FilePath is the path of file i of the layout (Extent.File).
func (l *Layout) FilePath(i int) string {
	if i <= 0 || i > len(l.more) {
		return l.Path
	}
	return l.more[i-1].path
}

// FileSize is the size in bytes of l.Path (the first part of a split GGUF) as the layout
// saw it.
func (l *Layout) FileSize() int64 { return l.size }

// Close releases the mapping of an experts.bin (a GGUF layout's mapping belongs to its
// gguf.File, which stays open). Views from Blob must not be used afterwards.
func (l *Layout) Close() error {
	l.data, l.closed = nil, true
	for i := range l.more {
		l.more[i].data = nil
	}
	if l.unmap == nil {
		return nil
	}
	u := l.unmap
	l.unmap = nil
	if err := u(); err != nil {
		return fmt.Errorf("experts: %s: unmap: %w", l.Path, err)
	}
	return nil
}
