// Package gguf reads and writes GGUF model files (versions 2 and 3, little-endian).
//
// Open maps the file read-only and parses its header; tensor data is never copied:
// TensorData returns slices of the mapping. OpenUnmapped parses the header with ordinary
// reads and leaves the file unmapped until Map, so the file's data can first be read around
// the page cache (the resident RAM arena) without a mapping of it in the process. Every malformed input is a *FormatError that
// names the file, the byte offset and what is wrong. Writer streams a new file tensor by
// tensor, so files larger than RAM can be written.
package gguf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"strata/engine/quant"
)

// File is an open GGUF file.
type File struct {
	Path       string
	Version    uint32
	Alignment  int64 // general.alignment, default 32
	KV         []KV  // in file order
	Tensors    []TensorInfo
	DataOffset int64 // file offset of the tensor data section

	data    []byte // the whole file: the read-only mapping (or a test's bytes); nil until mapped
	unmap   func() error
	size    int64     // the file's size when its header was read
	modTime time.Time // its modification time then (zero for a test's bytes)
	closed  bool
	keys    map[string]int // key -> index in KV
	byName  map[string]int // tensor name -> index in Tensors
	parts   []*File        // the other parts of a split model (split.go), in order
}

// KV is one metadata pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name   string
	Type   quant.Type
	Ne     []int64 // GGUF order: Ne[0] is the contiguous dimension
	Offset int64   // relative to the DataOffset of the file that holds it
	Size   int64   // bytes
	Part   int     // which file of a split model holds it (File.Part); 0 for a single file

	infoOffset int64 // where its info starts in the header, for errors
}

// Elements is the number of values in the tensor.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Ne {
		n *= d
	}
	return n
}

// Rows is the number of rows (Elements / Ne[0]).
func (t TensorInfo) Rows() int64 {
	if len(t.Ne) == 0 || t.Ne[0] == 0 {
		return 0
	}
	return t.Elements() / t.Ne[0]
}

// Open maps path read-only and parses and validates its header. The first part of a split
// model opens the other parts too (split.go).
func Open(path string) (*File, error) {
	f, err := openMapped(path)
	if err != nil {
		return nil, err
	}
	if err := f.openParts(openMapped); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// openMapped maps one file and parses its header.
func openMapped(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close() // the mapping outlives the descriptor
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.Size() == 0 {
		return nil, &FormatError{Path: path, Offset: 0, Msg: "empty file"}
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: map %d bytes: %w", path, st.Size(), err)
	}
	f, err := parse(path, data)
	if err != nil {
		return nil, errors.Join(err, unmap())
	}
	f.unmap, f.modTime = unmap, st.ModTime()
	return f, nil
}

// headerFirstRead is the prefix OpenUnmapped reads first: most headers fit (a 150k-token
// vocabulary and its merges take a few MiB), and a larger one grows it.
const headerFirstRead = 4 << 20

// OpenUnmapped parses and validates path's header with ordinary reads and does not map the
// file: TensorData and Mapping return nil until Map. The first part of a split model opens
// the other parts too, unmapped. Tensor extents are checked against the
// file's size, and a malformed header gives the same error as Open.
func OpenUnmapped(path string) (*File, error) {
	f, err := openUnmapped(path, headerFirstRead)
	if err != nil {
		return nil, err
	}
	if err := f.openParts(func(p string) (*File, error) { return openUnmapped(p, headerFirstRead) }); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// openUnmapped reads first bytes of the file, then more while the header runs past them.
func openUnmapped(path string, first int64) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return nil, &FormatError{Path: path, Offset: 0, Msg: "empty file"}
	}
	f, err := readHeader(path, fh, size, first)
	if err != nil {
		return nil, err
	}
	f.size, f.modTime = size, st.ModTime()
	return f, nil
}

// readHeader parses the header of the size-byte file r: it reads the first bytes, then
// more while the header runs past them.
func readHeader(path string, r io.ReaderAt, size, first int64) (*File, error) {
	var prefix []byte
	want := min(size, max(first, 1))
	for {
		grown := make([]byte, want)
		copy(grown, prefix)
		if _, err := r.ReadAt(grown[len(prefix):], int64(len(prefix))); err != nil {
			// io.EOF: the file shrank while it was read.
			return nil, fmt.Errorf("gguf: %s: read the header's first %d bytes: %w", path, want, err)
		}
		prefix = grown
		f, err := parseHeader(path, prefix, size)
		var short *shortError
		if !errors.As(err, &short) {
			return f, err
		}
		// Doubling bounds the number of parses by the log of the header's size.
		want = min(size, max(short.need, 2*int64(len(prefix))))
	}
}

// Mapped reports whether the file's data is mapped (TensorData and Mapping work), every
// part's for a split model.
func (f *File) Mapped() bool {
	for _, p := range f.parts {
		if p.data == nil {
			return false
		}
	}
	return f.data != nil
}

// Map maps the file read-only after OpenUnmapped; it does nothing when the file is mapped
// already. The file must still have the size and modification time its header was read
// with. Map is not safe to call concurrently with itself or with readers of the mapping.
func (f *File) Map() error {
	if f.closed {
		return fmt.Errorf("gguf: %s: map after Close", f.Path)
	}
	if err := f.mapSelf(); err != nil {
		return err
	}
	for _, p := range f.parts {
		if err := p.mapSelf(); err != nil {
			return err
		}
	}
	return nil
}

// mapSelf maps this one file.
func (f *File) mapSelf() error {
	if f.data != nil {
		return nil
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("gguf: map: %w", err)
	}
	defer fh.Close() // the mapping outlives the descriptor
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("gguf: map: %w", err)
	}
	if st.Size() != f.size || !st.ModTime().Equal(f.modTime) {
		return fmt.Errorf("gguf: %s: the file changed after its header was read (%d bytes modified %s, now %d bytes modified %s)",
			f.Path, f.size, f.modTime.Format(time.RFC3339Nano), st.Size(), st.ModTime().Format(time.RFC3339Nano))
	}
	data, unmap, err := mapFile(fh, f.size)
	if err != nil {
		return fmt.Errorf("gguf: %s: map %d bytes: %w", f.Path, f.size, err)
	}
	f.data, f.unmap = data, unmap
	return nil
}

// Size is the file's size in bytes (the first part's of a split model; TotalSize is all).
func (f *File) Size() int64 { return f.size }

// Close unmaps the file and every other part. Slices from TensorData and Mapping must not
// be used afterwards.
func (f *File) Close() error {
	var errs []error
	for _, p := range f.parts {
		errs = append(errs, p.Close())
	}
	f.data, f.closed = nil, true
	if f.unmap == nil {
		return errors.Join(errs...)
	}
	u := f.unmap
	f.unmap = nil
	if err := u(); err != nil {
		errs = append(errs, fmt.Errorf("gguf: %s: unmap: %w", f.Path, err))
	}
	return errors.Join(errs...)
}

// Lookup returns the value of a metadata key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the info of a tensor by name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// TensorData is the tensor's bytes inside the read-only mapping (no copy; do not write).
// It returns nil for a tensor that is not inside this file, before Map (after
// OpenUnmapped) and after Close. A split model's tensor comes from the part that holds it.
func (f *File) TensorData(t TensorInfo) []byte {
	if t.Part != 0 {
		p := f.Part(t.Part)
		if p == nil {
			return nil
		}
		t.Part = 0
		return p.TensorData(t)
	}
	start := f.DataOffset + t.Offset
	if t.Offset < 0 || t.Size < 0 || start < f.DataOffset || start > int64(len(f.data)) || t.Size > int64(len(f.data))-start {
		return nil
	}
	return f.data[start : start+t.Size : start+t.Size]
}

// Mapping is the whole data section of the mapping (of this part only: Part(i).Mapping()
// for the others of a split model), for code that advises the OS about
// it (prefetch, eviction). It is empty for a file without tensor data, and nil before Map
// (after OpenUnmapped) and after Close.
func (f *File) Mapping() []byte {
	if f.DataOffset >= int64(len(f.data)) {
		return nil
	}
	return f.data[f.DataOffset:len(f.data):len(f.data)]
}

// Architecture is general.architecture ("" when absent or not a string).
func (f *File) Architecture() string {
	v, _ := f.Lookup("general.architecture")
	s, _ := v.Str()
	return s
}

// get finds a key or says it is missing.
func (f *File) get(key string) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf: %s: metadata key %q is missing", f.Path, key)
	}
	return v, nil
}

func (f *File) wrongType(key string, v Value, want string) error {
	return fmt.Errorf("gguf: %s: metadata key %q is %s %s, want %s", f.Path, key, v.Type, v, want)
}

// GetString returns a string key.
func (f *File) GetString(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.Str()
	if !ok {
		return "", f.wrongType(key, v, "a string")
	}
	return s, nil
}

// GetUint returns a non-negative integer key of any integer type.
func (f *File) GetUint(key string) (uint64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.Uint()
	if !ok {
		return 0, f.wrongType(key, v, "a non-negative integer")
	}
	return u, nil
}

// GetInt returns an integer key of any integer type that fits in an int64.
func (f *File) GetInt(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	n, ok := v.Int()
	if !ok {
		return 0, f.wrongType(key, v, "an integer")
	}
	return n, nil
}

// GetFloat returns a float key (integers are converted).
func (f *File) GetFloat(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, f.wrongType(key, v, "a number")
	}
	return x, nil
}

// GetBool returns a bool key.
func (f *File) GetBool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.Bool()
	if !ok {
		return false, f.wrongType(key, v, "a bool")
	}
	return b, nil
}

// GetStrings returns an array-of-strings key (shared: do not modify).
func (f *File) GetStrings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	ss, ok := v.Strings()
	if !ok {
		return nil, f.wrongType(key, v, "an array of strings")
	}
	return ss, nil
}

// GetInts returns an array-of-integers key.
func (f *File) GetInts(key string) ([]int64, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	xs, ok := v.Ints()
	if !ok {
		return nil, f.wrongType(key, v, "an array of integers")
	}
	return xs, nil
}

// GetFloats returns an array-of-numbers key.
func (f *File) GetFloats(key string) ([]float64, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	xs, ok := v.Floats()
	if !ok {
		return nil, f.wrongType(key, v, "an array of numbers")
	}
	return xs, nil
}

// archKey is "<general.architecture>.<suffix>".
func (f *File) archKey(suffix string) (string, error) {
	a := f.Architecture()
	if a == "" {
		return "", fmt.Errorf("gguf: %s: general.architecture is missing, so %q has no key", f.Path, suffix)
	}
	return a + "." + suffix, nil
}

// ArchUint returns the integer key "<arch>.<suffix>", e.g. ArchUint("block_count").
func (f *File) ArchUint(suffix string) (uint64, error) {
	k, err := f.archKey(suffix)
	if err != nil {
		return 0, err
	}
	return f.GetUint(k)
}

// ArchUintOr is ArchUint with a default for a missing key; a key of the wrong type is
// still an error.
func (f *File) ArchUintOr(suffix string, def uint64) (uint64, error) {
	k, err := f.archKey(suffix)
	if err != nil {
		return 0, err
	}
	if _, ok := f.Lookup(k); !ok {
		return def, nil
	}
	return f.GetUint(k)
}

// ArchFloat returns the number key "<arch>.<suffix>".
func (f *File) ArchFloat(suffix string) (float64, error) {
	k, err := f.archKey(suffix)
	if err != nil {
		return 0, err
	}
	return f.GetFloat(k)
}

// ArchFloatOr is ArchFloat with a default for a missing key.
func (f *File) ArchFloatOr(suffix string, def float64) (float64, error) {
	k, err := f.archKey(suffix)
	if err != nil {
		return 0, err
	}
	if _, ok := f.Lookup(k); !ok {
		return def, nil
	}
	return f.GetFloat(k)
}

// ArchBoolOr returns the bool key "<arch>.<suffix>", or def when it is missing.
func (f *File) ArchBoolOr(suffix string, def bool) (bool, error) {
	k, err := f.archKey(suffix)
	if err != nil {
		return false, err
	}
	if _, ok := f.Lookup(k); !ok {
		return def, nil
	}
	return f.GetBool(k)
}
