package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"unicode/utf8"

	"strata/engine/quant"
)

// Format limits. The ones not fixed by the format bound what a hostile header can ask for.
const (
	magic            = "GGUF"
	defaultAlignment = 32
	maxAlignment     = 1 << 30
	maxDims          = 4  // GGML_MAX_DIMS
	maxNesting       = 16 // arrays of arrays; real files use at most 2 levels
	// maxArrayLen bounds one metadata array: vocabularies have a few 100k entries, and
	// decoded elements take up to 8x their encoded bytes.
	maxArrayLen = 1 << 24
	// preallocCap bounds how many slice elements are reserved up front from a count read from
	// the file; past it, slices grow only as real bytes are decoded.
	preallocCap = 1 << 16
	// Smallest encodings, used to cap counts by the bytes left before allocating.
	minKVBytes     = 8 + 4 + 1             // key length, value type, a 1-byte value
	minTensorBytes = 8 + 1 + 4 + 8 + 4 + 8 // name length, 1-byte name, n_dims, one dim, type, offset
)

// FormatError is a malformed-input error: which file, the byte offset, what is wrong.
type FormatError struct {
	Path   string
	Offset int64
	Msg    string
	// NotGGUF says the file does not start with the GGUF magic: it is some other file,
	// not a damaged model.
	NotGGUF bool
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: %s: offset %d: %s", e.Path, e.Offset, e.Msg)
}

// Unwrap lets errors.Is tell the two kinds apart: ErrNotGGUF or ErrMalformed.
func (e *FormatError) Unwrap() error {
	if e.NotGGUF {
		return ErrNotGGUF
	}
	return ErrMalformed
}

var (
	// ErrNotGGUF is wrapped by the error for a file that is not GGUF at all.
	ErrNotGGUF = errors.New("not a GGUF file")
	// ErrMalformed is wrapped by the error for a GGUF file that is truncated or damaged.
	ErrMalformed = errors.New("malformed GGUF file")
)

// decoder reads little-endian GGUF fields from the file's bytes: the whole file (the
// read-only mapping, or a test's bytes) or, for OpenUnmapped, a prefix of it. Bounds and
// limits are checked against the file's size, so a prefix gives the same errors as the
// whole file; a field that runs past the prefix but not past the file is a *shortError, and
// the caller reads more and parses again. Strings are copied out; nothing else of the data is.
type decoder struct {
	path string
	b    []byte // the file's first len(b) bytes
	size int64  // the file's size
	off  int64
}

// shortError says the header needs the file's bytes up to need, beyond the prefix held.
type shortError struct{ need int64 }

func (e *shortError) Error() string {
	return fmt.Sprintf("gguf: the header runs past the %d bytes read so far", e.need)
}

// need checks that the prefix holds the bytes up to end (which the caller has checked
// against the file's size).
func (d *decoder) need(end int64) error {
	if end > int64(len(d.b)) {
		return &shortError{need: end}
	}
	return nil
}

func (d *decoder) errAt(off int64, format string, args ...any) error {
	return &FormatError{Path: d.path, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) remaining() int64 { return d.size - d.off }

// take returns the next n bytes or a truncation error naming what was being read.
func (d *decoder) take(n int64, what string) ([]byte, error) {
	if n < 0 || n > d.remaining() {
		return nil, d.errAt(d.off, "truncated: %s needs %d bytes, %d left in the file", what, n, d.remaining())
	}
	if err := d.need(d.off + n); err != nil {
		return nil, err
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	p, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	p, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

// count reads a uint64 element count and caps it by the bytes left, given the smallest
// size one element can have.
func (d *decoder) count(what string, minBytes int64) (int64, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if max := uint64(d.remaining() / minBytes); n > max {
		return 0, d.errAt(at, "%s %d is absurd: the %d bytes left hold at most %d", what, n, d.remaining(), max)
	}
	return int64(n), nil
}

func (d *decoder) str(what string) (string, error) {
	at := d.off
	if err := d.skipStr(what, -1); err != nil {
		return "", err
	}
	return string(d.b[at+8 : d.off]), nil
}

// skipStr checks and steps over element idx of a string array (idx < 0: a plain string);
// the element's name is formatted only for an error, since vocabularies have 100k+ strings.
func (d *decoder) skipStr(what string, idx int64) error {
	at := d.off
	name := func() string {
		if idx < 0 {
			return what
		}
		return fmt.Sprintf("%s[%d]", what, idx)
	}
	p, err := d.take(8, "string length")
	if _, short := err.(*shortError); short {
		return err
	}
	if err != nil {
		return d.errAt(at, "truncated: %s length needs 8 bytes, %d left in the file", name(), d.remaining())
	}
	n := binary.LittleEndian.Uint64(p)
	if n > uint64(d.remaining()) {
		return d.errAt(at, "%s length %d is past the end of the file (%d bytes left)", name(), n, d.remaining())
	}
	if err := d.need(d.off + int64(n)); err != nil {
		return err
	}
	d.off += int64(n)
	return nil
}

// value decodes one metadata value of type t.
func (d *decoder) value(t ValueType, depth int, what string) (Value, error) {
	at := d.off
	switch {
	case t == TypeString:
		s, err := d.str(what)
		return Value{Type: t, s: s}, err
	case t == TypeArray:
		return d.array(depth, what)
	case t == TypeBool:
		p, err := d.take(1, what)
		if err != nil {
			return Value{}, err
		}
		if p[0] > 1 {
			return Value{}, d.errAt(at, "%s: bool byte is %d, not 0 or 1", what, p[0])
		}
		return Value{Type: t, bits: uint64(p[0])}, nil
	case t.isInteger() || t.isFloat():
		p, err := d.take(int64(t.fixedSize()), what)
		if err != nil {
			return Value{}, err
		}
		return scalarFromBytes(t, p), nil
	}
	return Value{}, d.errAt(at, "%s: unknown value type %d", what, uint32(t))
}

// scalarFromBytes decodes a fixed-size integer or float.
func scalarFromBytes(t ValueType, p []byte) Value {
	v := Value{Type: t}
	switch t {
	case TypeUint8:
		v.bits = uint64(p[0])
	case TypeInt8:
		v.bits = uint64(int64(int8(p[0])))
	case TypeUint16:
		v.bits = uint64(binary.LittleEndian.Uint16(p))
	case TypeInt16:
		v.bits = uint64(int64(int16(binary.LittleEndian.Uint16(p))))
	case TypeUint32:
		v.bits = uint64(binary.LittleEndian.Uint32(p))
	case TypeInt32:
		v.bits = uint64(int64(int32(binary.LittleEndian.Uint32(p))))
	case TypeUint64, TypeInt64:
		v.bits = binary.LittleEndian.Uint64(p)
	case TypeFloat32:
		v.f = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
	case TypeFloat64:
		v.f = math.Float64frombits(binary.LittleEndian.Uint64(p))
	}
	return v
}

func (d *decoder) array(depth int, what string) (Value, error) {
	at := d.off
	if depth >= maxNesting {
		return Value{}, d.errAt(at, "%s: arrays nested more than %d deep", what, maxNesting)
	}
	et, err := d.u32(what + " element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.Valid() {
		return Value{}, d.errAt(at, "%s: unknown array element type %d", what, et)
	}
	cat := d.off
	n, err := d.count(what+" element count", elem.minSize())
	if err != nil {
		return Value{}, err
	}
	if n > maxArrayLen {
		return Value{}, d.errAt(cat, "%s: %d elements is beyond the limit of %d", what, n, maxArrayLen)
	}
	v := Value{Type: TypeArray, ElemType: elem, isArray: true}
	reserve := int(min(n, preallocCap))
	switch {
	case elem.isInteger() || elem.isFloat():
		size := int64(elem.fixedSize())
		p, err := d.take(n*size, what)
		if err != nil {
			return Value{}, err
		}
		if elem.isFloat() {
			v.floats = make([]float64, n)
			for i := range v.floats {
				v.floats[i] = scalarFromBytes(elem, p[int64(i)*size:]).f
			}
		} else {
			v.ints = make([]uint64, n)
			for i := range v.ints {
				v.ints[i] = scalarFromBytes(elem, p[int64(i)*size:]).bits
			}
		}
	case elem == TypeBool:
		p, err := d.take(n, what)
		if err != nil {
			return Value{}, err
		}
		v.bools = make([]bool, n)
		for i, c := range p {
			if c > 1 {
				return Value{}, d.errAt(d.off-n+int64(i), "%s: bool byte is %d, not 0 or 1", what, c)
			}
			v.bools[i] = c == 1
		}
	case elem == TypeString:
		// Validate every length first, then copy the whole array's bytes once and slice
		// the strings out of that copy: one allocation for a 150k-token vocabulary.
		start := d.off
		for i := range n {
			if err := d.skipStr(what, i); err != nil {
				return Value{}, err
			}
		}
		whole := string(d.b[start:d.off])
		v.strs = make([]string, n)
		off := int64(0)
		for i := range v.strs {
			l := int64(binary.LittleEndian.Uint64(d.b[start+off:]))
			v.strs[i] = whole[off+8 : off+8+l]
			off += 8 + l
		}
	default: // nested arrays
		v.arrays = make([]Value, 0, reserve)
		for i := range n {
			e, err := d.array(depth+1, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return Value{}, err
			}
			v.arrays = append(v.arrays, e)
		}
	}
	return v, nil
}

// parse reads and validates a whole GGUF file held in b (the mapping, or a test's bytes).
// The returned File refers to b for tensor data; it copies only the metadata.
func parse(path string, b []byte) (*File, error) {
	f, err := parseHeader(path, b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	f.data, f.size = b, int64(len(b))
	return f, nil
}

// parseHeader reads and validates the header of a GGUF file of size bytes from prefix, its
// first bytes. It returns a *shortError when the header runs past the prefix. The File has
// no data.
func parseHeader(path string, prefix []byte, size int64) (*File, error) {
	d := &decoder{path: path, b: prefix, size: size}
	head, err := d.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(head) != magic {
		return nil, &FormatError{Path: d.path, Msg: fmt.Sprintf("bad magic %q: not a GGUF file", head), NotGGUF: true}
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, d.errAt(4, "unsupported GGUF version 1 (re-convert the model; v2 and v3 are supported)")
	case bits.ReverseBytes32(version) >= 1 && bits.ReverseBytes32(version) <= 3:
		return nil, d.errAt(4, "big-endian GGUF (version %d byte-swapped): only little-endian files are supported", bits.ReverseBytes32(version))
	default:
		return nil, d.errAt(4, "unsupported GGUF version %d", version)
	}
	// Each count is capped by what the rest of the file could hold at the minimum sizes.
	nTensors, err := d.count("tensor count", minTensorBytes)
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("metadata key count", minKVBytes)
	if err != nil {
		return nil, err
	}
	f := &File{
		Path:      path,
		Version:   version,
		Alignment: defaultAlignment,
		KV:        make([]KV, 0, min(nKV, preallocCap)),
		Tensors:   make([]TensorInfo, 0, min(nTensors, preallocCap)),
		keys:      make(map[string]int),
		byName:    make(map[string]int),
	}
	for i := range nKV {
		if err := d.kv(f, i); err != nil {
			return nil, err
		}
	}
	for i := range nTensors {
		if err := d.tensorInfo(f, i); err != nil {
			return nil, err
		}
	}
	f.DataOffset = alignUp(d.off, f.Alignment)
	if err := checkLayout(d, f); err != nil {
		return nil, err
	}
	return f, nil
}

// kv decodes metadata pair i and, for general.alignment, checks and applies it.
func (d *decoder) kv(f *File, i int64) error {
	at := d.off
	key, err := d.str(fmt.Sprintf("key %d", i))
	if err != nil {
		return err
	}
	if key == "" || !utf8.ValidString(key) {
		return d.errAt(at, "key %d is empty or not UTF-8 (%q)", i, key)
	}
	if _, dup := f.keys[key]; dup {
		return d.errAt(at, "duplicate key %q", key)
	}
	tat := d.off
	t, err := d.u32(fmt.Sprintf("key %q value type", key))
	if err != nil {
		return err
	}
	if !ValueType(t).Valid() {
		return d.errAt(tat, "key %q: unknown value type %d", key, t)
	}
	vat := d.off
	v, err := d.value(ValueType(t), 0, fmt.Sprintf("key %q", key))
	if err != nil {
		return err
	}
	if key == "general.alignment" {
		a, ok := v.Uint()
		if !ok || a == 0 || a > maxAlignment || a&(a-1) != 0 {
			return d.errAt(vat, "general.alignment is %s (%s): want a power of two between 1 and %d", v, v.Type, maxAlignment)
		}
		f.Alignment = int64(a)
	}
	f.keys[key] = len(f.KV)
	f.KV = append(f.KV, KV{Key: key, Value: v})
	return nil
}

// tensorInfo decodes tensor info i and checks what can be checked without the others.
func (d *decoder) tensorInfo(f *File, i int64) error {
	at := d.off
	name, err := d.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return err
	}
	if name == "" || !utf8.ValidString(name) {
		return d.errAt(at, "tensor %d: name is empty or not UTF-8 (%q)", i, name)
	}
	if _, dup := f.byName[name]; dup {
		return d.errAt(at, "duplicate tensor name %q", name)
	}
	dat := d.off
	nDims, err := d.u32(fmt.Sprintf("tensor %q dimension count", name))
	if err != nil {
		return err
	}
	if nDims == 0 || nDims > maxDims {
		return d.errAt(dat, "tensor %q: %d dimensions (want 1 to %d)", name, nDims, maxDims)
	}
	ne := make([]int64, nDims)
	elems := int64(1)
	for j := range ne {
		nat := d.off
		n, err := d.u64(fmt.Sprintf("tensor %q ne[%d]", name, j))
		if err != nil {
			return err
		}
		if n == 0 || n > math.MaxInt64 {
			return d.errAt(nat, "tensor %q: ne[%d] = %d (want 1 or more)", name, j, n)
		}
		ne[j] = int64(n)
		hi, lo := bits.Mul64(uint64(elems), n)
		if hi != 0 || lo > math.MaxInt64 {
			return d.errAt(nat, "tensor %q: element count overflows (ne %v...)", name, ne[:j+1])
		}
		elems = int64(lo)
	}
	tat := d.off
	typ, err := d.u32(fmt.Sprintf("tensor %q type", name))
	if err != nil {
		return err
	}
	qt := quant.Type(typ)
	if !qt.Known() {
		return d.errAt(tat, "tensor %q: unknown tensor type %d", name, typ)
	}
	if ne[0]%int64(qt.BlockSize()) != 0 {
		return d.errAt(dat, "tensor %q: row of %d %s values is not a whole number of %d-value blocks", name, ne[0], qt, qt.BlockSize())
	}
	hi, lo := bits.Mul64(uint64(elems/int64(qt.BlockSize())), uint64(qt.BlockBytes()))
	if hi != 0 || lo > math.MaxInt64 {
		return d.errAt(dat, "tensor %q: byte size overflows (ne %v, %s)", name, ne, qt)
	}
	oat := d.off
	off, err := d.u64(fmt.Sprintf("tensor %q offset", name))
	if err != nil {
		return err
	}
	if off > math.MaxInt64 {
		return d.errAt(oat, "tensor %q: offset %d is absurd", name, off)
	}
	if int64(off)%f.Alignment != 0 {
		return d.errAt(oat, "tensor %q: data offset %d is not a multiple of the alignment %d", name, off, f.Alignment)
	}
	f.byName[name] = len(f.Tensors)
	f.Tensors = append(f.Tensors, TensorInfo{Name: name, Type: qt, Ne: ne, Offset: int64(off), Size: int64(lo), infoOffset: at})
	return nil
}

// checkLayout verifies every tensor lies inside the file and no two overlap.
func checkLayout(d *decoder, f *File) error {
	if len(f.Tensors) == 0 {
		return nil
	}
	size := d.size
	if f.DataOffset > size {
		return d.errAt(size, "truncated: the tensor data section starts at %d, past the end of the %d-byte file", f.DataOffset, size)
	}
	avail := size - f.DataOffset
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	for _, t := range f.Tensors {
		if t.Offset > avail || t.Size > avail-t.Offset {
			return d.errAt(t.infoOffset, "tensor %q: bytes [%d, %d) of the data section are out of bounds of the file (data section %d bytes from offset %d): truncated file?",
				t.Name, t.Offset, t.Offset+t.Size, avail, f.DataOffset)
		}
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		p, q := f.Tensors[order[k-1]], f.Tensors[order[k]]
		if p.Offset+p.Size > q.Offset {
			return d.errAt(q.infoOffset, "tensor %q: bytes [%d, %d) overlap tensor %q at [%d, %d)",
				q.Name, q.Offset, q.Offset+q.Size, p.Name, p.Offset, p.Offset+p.Size)
		}
	}
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }
