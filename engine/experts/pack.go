package experts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"strata/engine/gguf"
	"strata/engine/model"
	"strata/platform"
)

// experts.bin is a header, then one blob per (layer, expert) ordered by layer then expert,
// each blob its gate, up and down bytes back to back, starting on a PackAlign boundary and
// zero-padded to the next one. The header (little-endian):
//
//	magic "STRXPERT", version u32, key length u32, layers u32, experts u32,
//	gate, up, down bytes u64, alignment u64, blob count u64, first blob offset u64,
//	file size u64, key bytes, blob offsets [count]u64, CRC-32C of everything before it u32,
//	zeros up to the first blob.
const (
	// PackFile is the name of the packed expert file next to a model.
	PackFile = "experts.bin"
	// PackAlign is where every blob of experts.bin starts: a multiple of the largest
	// sector size unbuffered reads need, and of the page size.
	PackAlign   = 4096
	packMagic   = "STRXPERT"
	packVersion = 1
	// packFixed is the header's size before the key.
	packFixed = 8 + 4*4 + 8*7
	// packSample is how many bytes at each end of a part OpenPack compares with the GGUF.
	packSample = 256
)

// PackError is a malformed, stale or foreign experts.bin.
type PackError struct {
	Path   string
	Offset int64 // byte offset in the file the problem is at, -1 when it is not about one place
	Msg    string
}

func (e *PackError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("experts: %s: %s", e.Path, e.Msg)
	}
	return fmt.Sprintf("experts: %s: at byte %d: %s", e.Path, e.Offset, e.Msg)
}

// packHeader is the decoded index of an experts.bin.
type packHeader struct {
	key       string
	shape     Shape
	dataStart int64
	fileSize  int64
	offsets   []int64 // by Shape.Index
}

// packStride is the distance between blobs: the blob rounded up to PackAlign.
func packStride(s Shape) int64 { return alignUp(s.BlobBytes(), PackAlign) }

func alignUp(n, a int64) int64   { return (n + a - 1) / a * a }
func alignDown(n, a int64) int64 { return n / a * a }

// newPackHeader lays out the blobs of shape s.
func newPackHeader(key string, s Shape) packHeader {
	h := packHeader{key: key, shape: s, offsets: make([]int64, s.Count())}
	h.dataStart = alignUp(int64(packFixed+len(key)+8*s.Count()+4), PackAlign)
	stride := packStride(s)
	for i := range h.offsets {
		h.offsets[i] = h.dataStart + int64(i)*stride
	}
	h.fileSize = h.dataStart + int64(s.Count())*stride
	return h
}

// encode writes the header, padded with zeros to the first blob.
func (h packHeader) encode() []byte {
	b := make([]byte, 0, h.dataStart)
	le := binary.LittleEndian
	b = append(b, packMagic...)
	b = le.AppendUint32(b, packVersion)
	b = le.AppendUint32(b, uint32(len(h.key)))
	b = le.AppendUint32(b, uint32(h.shape.Layers))
	b = le.AppendUint32(b, uint32(h.shape.Experts))
	for _, v := range []int64{h.shape.GateBytes, h.shape.UpBytes, h.shape.DownBytes, PackAlign, int64(len(h.offsets)), h.dataStart, h.fileSize} {
		b = le.AppendUint64(b, uint64(v))
	}
	b = append(b, h.key...)
	for _, o := range h.offsets {
		b = le.AppendUint64(b, uint64(o))
	}
	b = le.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b[:h.dataStart] // the rest of the capacity is zeros
}

// packFields are the fixed fields at the start of an experts.bin header.
type packFields struct {
	keyLen, layers, experts, gate, up, down, count, dataStart, fileSize int64
}

// indexEnd is where the index ends and its CRC-32C starts: decodePackHeader needs the
// header up to indexEnd()+4.
func (pf packFields) indexEnd() int64 { return packFixed + pf.keyLen + 8*pf.count }

// decodePackFields parses and checks the fixed fields at the start of head (at least
// packFixed bytes unless the file is shorter) against size, the file's size.
func decodePackFields(path string, head []byte, size int64) (packFields, error) {
	bad := func(off int64, format string, args ...any) (packFields, error) {
		return packFields{}, &PackError{Path: path, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if size < packFixed {
		return bad(-1, "%d bytes is too short for an experts.bin header", size)
	}
	if len(head) < packFixed {
		return bad(0, "only %d header bytes were read, the fixed fields need %d", len(head), packFixed)
	}
	if string(head[:8]) != packMagic {
		return bad(0, "not an experts.bin (magic %q)", head[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(head[8:]); v != packVersion {
		return bad(8, "format version %d, this build reads version %d (run strata pack again)", v, packVersion)
	}
	pf := packFields{
		keyLen:  int64(le.Uint32(head[12:])),
		layers:  int64(le.Uint32(head[16:])),
		experts: int64(le.Uint32(head[20:])),
	}
	var u [7]int64
	for i := range u {
		x := le.Uint64(head[24+8*i:])
		if x > 1<<62 {
			return bad(int64(24+8*i), "field value %d is out of range", x)
		}
		u[i] = int64(x)
	}
	var align int64
	pf.gate, pf.up, pf.down, align, pf.count, pf.dataStart, pf.fileSize = u[0], u[1], u[2], u[3], u[4], u[5], u[6]
	switch {
	case pf.keyLen > 1024:
		return bad(12, "model key of %d bytes", pf.keyLen)
	case pf.layers <= 0 || pf.experts <= 0 || pf.layers > 1<<16 || pf.experts > 1<<16:
		return bad(16, "%d layers of %d experts", pf.layers, pf.experts)
	case pf.gate <= 0 || pf.up <= 0 || pf.down <= 0 || pf.gate+pf.up+pf.down > 1<<40:
		return bad(24, "expert part sizes %d, %d, %d", pf.gate, pf.up, pf.down)
	case align != PackAlign:
		return bad(48, "blob alignment %d, want %d", align, PackAlign)
	case pf.count != pf.layers*pf.experts:
		return bad(56, "%d blobs for %d layers of %d experts", pf.count, pf.layers, pf.experts)
	case pf.fileSize != size:
		return bad(72, "the index says the file has %d bytes but it has %d (truncated or still being written?)", pf.fileSize, size)
	}
	if end := pf.indexEnd(); end+4 > pf.dataStart || pf.dataStart > size || pf.dataStart%PackAlign != 0 {
		return bad(64, "first blob at %d, the index needs %d bytes", pf.dataStart, end+4)
	}
	return pf, nil
}

// decodePackHeader parses and checks the header at the start of head (at least up to the
// index's checksum; a whole experts.bin will do) of an experts.bin of size bytes.
func decodePackHeader(path string, head []byte, size int64) (packHeader, error) {
	bad := func(off int64, format string, args ...any) (packHeader, error) {
		return packHeader{}, &PackError{Path: path, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	pf, err := decodePackFields(path, head, size)
	if err != nil {
		return packHeader{}, err
	}
	end := pf.indexEnd()
	if int64(len(head)) < end+4 {
		return bad(packFixed, "only %d header bytes were read, the index needs %d", len(head), end+4)
	}
	le := binary.LittleEndian
	if got, want := le.Uint32(head[end:]), crc32.Checksum(head[:end], crc32.MakeTable(crc32.Castagnoli)); got != want {
		return bad(end, "index checksum %08x, computed %08x (the index is corrupt)", got, want)
	}
	h := packHeader{
		key:       string(head[packFixed : packFixed+pf.keyLen]),
		shape:     Shape{Layers: int(pf.layers), Experts: int(pf.experts), GateBytes: pf.gate, UpBytes: pf.up, DownBytes: pf.down},
		dataStart: pf.dataStart,
		fileSize:  pf.fileSize,
		offsets:   make([]int64, pf.count),
	}
	blob, prevEnd := h.shape.BlobBytes(), pf.dataStart
	for i := range h.offsets {
		at := packFixed + pf.keyLen + 8*int64(i)
		o := int64(le.Uint64(head[at:]))
		if o < prevEnd || o%PackAlign != 0 || o > size-blob {
			return bad(at, "blob %d at offset %d (after %d, aligned to %d, ending by %d)", i, o, prevEnd, PackAlign, size)
		}
		h.offsets[i], prevEnd = o, o+blob
	}
	return h, nil
}

// readPackHeader reads and checks the header of the experts.bin fh (size bytes) with
// ordinary reads: the fixed fields first, then as much as they say the index takes.
func readPackHeader(path string, fh io.ReaderAt, size int64) (packHeader, error) {
	head := make([]byte, min(size, packFixed))
	if err := readFull(fh, path, head, 0); err != nil {
		return packHeader{}, err
	}
	pf, err := decodePackFields(path, head, size)
	if err != nil {
		return packHeader{}, err
	}
	head = make([]byte, pf.indexEnd()+4) // at most dataStart, checked against the file size
	if err := readFull(fh, path, head, 0); err != nil {
		return packHeader{}, err
	}
	return decodePackHeader(path, head, size)
}

// readFull reads len(dst) bytes at off of the file fh (named path for errors).
func readFull(fh io.ReaderAt, path string, dst []byte, off int64) error {
	if _, err := fh.ReadAt(dst, off); err != nil {
		return fmt.Errorf("experts: %s: read of %d bytes at offset %d: %w", path, len(dst), off, err)
	}
	return nil
}

// Pack writes DIR/experts.bin for f's experts (through a temporary file that is synced and
// then renamed, so a reader never sees half a file) and returns its path. progress (may be
// nil) gets blob bytes written so far and the total.
func Pack(ctx context.Context, f *gguf.File, dir string, progress func(done, total int64)) (path string, err error) {
	src, err := GGUFLayout(f)
	if err != nil {
		return "", err
	}
	if src.mixed {
		return "", fmt.Errorf("experts: pack %s: its layers store experts in different types, which experts.bin (one blob size) does not hold; the engine reads the GGUF in place", f.Path)
	}
	h := newPackHeader(ModelKey(f), src.Shape)
	path = filepath.Join(dir, PackFile)
	tmp, err := os.CreateTemp(dir, PackFile+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("experts: pack: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 8<<20)
	if _, err := w.Write(h.encode()); err != nil {
		return "", fmt.Errorf("experts: pack %s: %w", tmp.Name(), err)
	}
	s := src.Shape
	total, done := int64(s.Count())*s.BlobBytes(), int64(0)
	pad := make([]byte, packStride(s)-s.BlobBytes())
	for layer := range s.Layers {
		if layer+1 < s.Layers {
			forEachExpertTensor(f, layer+1, platform.AdviseWillNeed) // read ahead while this layer is copied
		}
		for e := range s.Experts {
			if err := ctx.Err(); err != nil {
				return "", fmt.Errorf("experts: pack: %w", err)
			}
			id := ID{layer, e}
			gate, up, down := src.Blob(id)
			for _, b := range [][]byte{gate, up, down, pad} {
				if _, err := w.Write(b); err != nil {
					return "", fmt.Errorf("experts: pack %s: %s: %w", tmp.Name(), id, err)
				}
			}
			done += s.BlobBytes()
			if progress != nil {
				progress(done, total)
			}
		}
		forEachExpertTensor(f, layer, platform.AdviseDontNeed) // copied: leave the pages to the page cache
	}
	if err := w.Flush(); err != nil {
		return "", fmt.Errorf("experts: pack %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it private; a model file is not
		return "", fmt.Errorf("experts: pack %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("experts: pack %s: sync: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("experts: pack %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("experts: pack: %w", err)
	}
	syncDir(dir)
	return path, nil
}

// forEachExpertTensor gives the OS advice about a layer's stacked expert tensors (advice
// only: errors are ignored).
func forEachExpertTensor(f *gguf.File, layer int, advise func([]byte) error) {
	for _, name := range model.ExpertTensors(layer) {
		if t, ok := f.Tensor(name); ok {
			if b := f.TensorData(t); b != nil {
				_ = advise(b)
			}
		}
	}
}

// syncDir makes a rename in dir durable where the OS allows syncing a folder (not on
// Windows, whose NTFS journals the rename itself).
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	if err := d.Sync(); err != nil {
		slog.Debug("experts: sync folder", "dir", dir, "err", err)
	}
	d.Close()
}

// OpenPack checks that the experts.bin at path belongs to f with ordinary reads, mapping
// neither file: format version, model key, expert shape, every blob's offset and the file
// size, and a sample of each layer's bytes against the GGUF. A stale or foreign file is a
// *PackError naming it. The layout is attached (Blob works) when f is mapped; for a model
// opened with gguf.OpenUnmapped it stays unmapped, like the model, until Attach maps
// experts.bin, so FillArena can read it around the page cache with no mapping of either
// file.
func OpenPack(path string, f *gguf.File) (*Layout, error) {
	src, err := GGUFLayout(f)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("experts: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("experts: %w", err)
	}
	h, err := readPackHeader(path, fh, st.Size())
	if err != nil {
		return nil, err
	}
	if key := ModelKey(f); h.key != key {
		return nil, &PackError{Path: path, Offset: packFixed, Msg: fmt.Sprintf("written for another model (key %s, %s has %s): run strata pack again", h.key, f.Path, key)}
	}
	if h.shape != src.Shape {
		return nil, &PackError{Path: path, Offset: 16, Msg: fmt.Sprintf("expert shape %+v, %s has %+v", h.shape, f.Path, src.Shape)}
	}
	l := &Layout{Path: path, Shape: h.shape, size: h.fileSize, parts: make([][3]Extent, len(h.offsets))}
	s := h.shape
	for i, o := range h.offsets {
		l.parts[i] = [3]Extent{{Offset: o, Len: s.GateBytes}, {Offset: o + s.GateBytes, Len: s.UpBytes}, {Offset: o + s.GateBytes + s.UpBytes, Len: s.DownBytes}}
	}
	if err := sampleMatches(fh, l, src); err != nil {
		return nil, err
	}
	if f.Mapped() {
		if err := l.Attach(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// sampleMatches compares the ends of every part of each layer's first and last expert in
// the pack (read from packFile) with the GGUF, with buffered reads of those bytes only: a
// model rewritten with the same tensor index but other weights (a synthetic model with
// another seed) is caught here without reading everything.
func sampleMatches(packFile io.ReaderAt, pack, src *Layout) error {
	models := make([]*os.File, src.Files()) // a split GGUF's parts
	for i := range models {
		fh, err := os.Open(src.FilePath(i))
		if err != nil {
			return fmt.Errorf("experts: check %s against the model: %w", pack.Path, err)
		}
		defer fh.Close()
		models[i] = fh
	}
	a, b := make([]byte, packSample), make([]byte, packSample)
	for layer := range src.Shape.Layers {
		for _, e := range []int{0, src.Shape.Experts - 1} {
			id := ID{layer, e}
			pp, sp := pack.Parts(id), src.Parts(id)
			for p := range sp {
				// The parts are as long in both files (Pack refuses quantisation mixes).
				n := min(sp[p].Len, packSample)
				for _, at := range []int64{0, sp[p].Len - n} {
					if err := readFull(packFile, pack.Path, a[:n], pp[p].Offset+at); err != nil {
						return err
					}
					if err := readFull(models[sp[p].File], src.FilePath(sp[p].File), b[:n], sp[p].Offset+at); err != nil {
						return err
					}
					if !bytes.Equal(a[:n], b[:n]) {
						return &PackError{Path: pack.Path, Offset: pp[p].Offset,
							Msg: fmt.Sprintf("%s %s bytes differ from %s: stale, run strata pack again", id, partName(p), src.Path)}
					}
				}
			}
		}
	}
	return nil
}

func partName(p int) string { return [3]string{"gate", "up", "down"}[p] }

// FindPack opens the experts.bin next to f when there is one and it matches f. A missing
// file is silent; one that does not match is logged as a warning, and the caller reads the
// GGUF in place.
func FindPack(f *gguf.File) (*Layout, bool) {
	path := filepath.Join(filepath.Dir(f.Path), PackFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	l, err := OpenPack(path, f)
	if err != nil {
		slog.Warn("experts: not using the packed experts next to the model; reading the GGUF in place", "model", f.Path, "err", err)
		return nil, false
	}
	slog.Info("experts: using packed experts", "path", path)
	return l, true
}
