// Package gguf reads and writes GGUF model files (versions 2 and 3, little-endian).
//
// Open maps the file read-only and parses its header; tensor data is never copied:
// TensorData returns slices of the mapping. Every malformed input is a *FormatError that
// names the file, the byte offset and what is wrong. Writer streams a new file tensor by
// tensor, so files larger than RAM can be written.
package gguf

import (
	"errors"
	"fmt"
	"os"

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

	data   []byte // the whole file: the read-only mapping (or a test's bytes)
	unmap  func() error
	keys   map[string]int // key -> index in KV
	byName map[string]int // tensor name -> index in Tensors
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
	Offset int64   // relative to DataOffset
	Size   int64   // bytes

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

// Open maps path read-only and parses and validates its header.
func Open(path string) (*File, error) {
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
	f.unmap = unmap
	return f, nil
}

// Close unmaps the file. Slices from TensorData and Mapping must not be used afterwards.
func (f *File) Close() error {
	f.data = nil
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	if err := u(); err != nil {
		return fmt.Errorf("gguf: %s: unmap: %w", f.Path, err)
	}
	return nil
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
// It returns nil for a tensor that is not inside this file or after Close.
func (f *File) TensorData(t TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	if t.Offset < 0 || t.Size < 0 || start < f.DataOffset || start > int64(len(f.data)) || t.Size > int64(len(f.data))-start {
		return nil
	}
	return f.data[start : start+t.Size : start+t.Size]
}

// Mapping is the whole data section of the mapping, for code that advises the OS about
// it (prefetch, eviction). It is empty for a file without tensor data.
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
