package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"

	"strata/engine/quant"
)

// Writer builds a GGUF v3 file. Metadata is kept in memory; tensor data is produced by
// each tensor's write callback while WriteFile runs, so tensors are streamed to disk and
// never held all at once.
type Writer struct {
	alignment int64
	kv        []KV
	keys      map[string]int
	tensors   []pendingTensor
	names     map[string]bool
	dataSize  int64 // data section size so far, padding included
	err       error // first error of Add*, reported by WriteFile
}

type pendingTensor struct {
	info  TensorInfo
	write func(io.Writer) error
}

// NewWriter starts a GGUF v3 file with alignment 32.
func NewWriter() *Writer {
	return &Writer{alignment: defaultAlignment, keys: make(map[string]int), names: make(map[string]bool)}
}

// SetAlignment sets the data alignment (a power of two); call it before AddTensor.
// A value other than 32 is recorded as general.alignment.
func (w *Writer) SetAlignment(n int64) {
	switch {
	case n <= 0 || n > maxAlignment || n&(n-1) != 0:
		w.fail(fmt.Errorf("gguf: writer: alignment %d is not a power of two between 1 and %d", n, maxAlignment))
	case len(w.tensors) > 0:
		w.fail(errors.New("gguf: writer: SetAlignment after AddTensor"))
	default:
		w.alignment = n
	}
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Add appends a metadata pair. A duplicate or empty key, or an invalid value, makes
// WriteFile fail.
func (w *Writer) Add(key string, v Value) {
	switch {
	case key == "":
		w.fail(errors.New("gguf: writer: empty metadata key"))
	case w.keys[key] != 0:
		w.fail(fmt.Errorf("gguf: writer: duplicate metadata key %q", key))
	case !v.Type.Valid() || v.Type == TypeArray && (!v.isArray || !v.ElemType.Valid()):
		w.fail(fmt.Errorf("gguf: writer: key %q: invalid value of type %s", key, v.Type))
	default:
		w.kv = append(w.kv, KV{Key: key, Value: v})
		w.keys[key] = len(w.kv) // 1-based so the zero value means absent
	}
}

// Convenience adders.

func (w *Writer) AddString(key, s string)          { w.Add(key, NewString(s)) }
func (w *Writer) AddUint32(key string, v uint32)   { w.Add(key, NewUint32(v)) }
func (w *Writer) AddInt32(key string, v int32)     { w.Add(key, NewInt32(v)) }
func (w *Writer) AddUint64(key string, v uint64)   { w.Add(key, NewUint64(v)) }
func (w *Writer) AddFloat32(key string, v float32) { w.Add(key, NewFloat32(v)) }
func (w *Writer) AddBool(key string, b bool)       { w.Add(key, NewBool(b)) }
func (w *Writer) AddStrings(key string, ss []string) {
	w.Add(key, NewStrings(ss))
}
func (w *Writer) AddInt32s(key string, xs []int32)     { w.Add(key, NewInt32s(xs)) }
func (w *Writer) AddFloat32s(key string, xs []float32) { w.Add(key, NewFloat32s(xs)) }
func (w *Writer) AddBools(key string, bs []bool)       { w.Add(key, NewBools(bs)) }

// AddTensor declares a tensor. Its size follows from typ and ne; write is called during
// WriteFile, in AddTensor order, and must write exactly that many bytes.
func (w *Writer) AddTensor(name string, typ quant.Type, ne []int64, write func(io.Writer) error) error {
	err := w.addTensor(name, typ, ne, write)
	if err != nil {
		w.fail(err)
	}
	return err
}

func (w *Writer) addTensor(name string, typ quant.Type, ne []int64, write func(io.Writer) error) error {
	switch {
	case name == "":
		return errors.New("gguf: writer: empty tensor name")
	case w.names[name]:
		return fmt.Errorf("gguf: writer: duplicate tensor name %q", name)
	case !typ.Known():
		return fmt.Errorf("gguf: writer: tensor %q: unknown type %d", name, uint32(typ))
	case len(ne) == 0 || len(ne) > maxDims:
		return fmt.Errorf("gguf: writer: tensor %q: %d dimensions (want 1 to %d)", name, len(ne), maxDims)
	case write == nil:
		return fmt.Errorf("gguf: writer: tensor %q: no write function", name)
	}
	elems := uint64(1)
	for i, n := range ne {
		if n <= 0 {
			return fmt.Errorf("gguf: writer: tensor %q: ne[%d] = %d", name, i, n)
		}
		hi, lo := bits.Mul64(elems, uint64(n))
		if hi != 0 || lo > math.MaxInt64 {
			return fmt.Errorf("gguf: writer: tensor %q: element count of %v overflows", name, ne)
		}
		elems = lo
	}
	if ne[0]%int64(typ.BlockSize()) != 0 {
		return fmt.Errorf("gguf: writer: tensor %q: row of %d is not a whole number of %d-value %s blocks", name, ne[0], typ.BlockSize(), typ)
	}
	hi, size := bits.Mul64(elems/uint64(typ.BlockSize()), uint64(typ.BlockBytes()))
	if hi != 0 || size > math.MaxInt64-uint64(w.dataSize)-uint64(w.alignment) {
		return fmt.Errorf("gguf: writer: tensor %q: size overflows", name)
	}
	info := TensorInfo{Name: name, Type: typ, Ne: append([]int64{}, ne...), Offset: w.dataSize, Size: int64(size)}
	w.dataSize = alignUp(w.dataSize+int64(size), w.alignment)
	w.names[name] = true
	w.tensors = append(w.tensors, pendingTensor{info: info, write: write})
	return nil
}

// WriteFile writes the file to path+".tmp", syncs it and renames it to path, so a
// half-written file never has the final name.
func (w *Writer) WriteFile(path string) (err error) {
	if w.err != nil {
		return w.err
	}
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("gguf: writer: %w", err)
	}
	defer func() {
		if err != nil {
			fh.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(fh, 4<<20)
	if err := w.writeTo(bw, path); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: writer: %s: %w", tmp, err)
	}
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("gguf: writer: %s: sync: %w", tmp, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("gguf: writer: %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("gguf: writer: %w", err)
	}
	return nil
}

// kvList is the metadata as written: general.alignment added when it is not the default.
func (w *Writer) kvList() []KV {
	kv := w.kv
	if i := w.keys["general.alignment"]; i != 0 {
		kv = append([]KV{}, kv...)
		kv[i-1].Value = NewUint32(uint32(w.alignment))
	} else if w.alignment != defaultAlignment {
		kv = append(append([]KV{}, kv...), KV{Key: "general.alignment", Value: NewUint32(uint32(w.alignment))})
	}
	return kv
}

// writeTo writes the header, then each tensor's data, padded to the alignment.
func (w *Writer) writeTo(bw *bufio.Writer, path string) error {
	e := &encoder{w: bw}
	kv := w.kvList()
	e.raw([]byte(magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(kv)))
	for _, p := range kv {
		e.str(p.Key)
		e.u32(uint32(p.Value.Type))
		e.value(p.Value)
	}
	for _, t := range w.tensors {
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Ne)))
		for _, n := range t.info.Ne {
			e.u64(uint64(n))
		}
		e.u32(uint32(t.info.Type))
		e.u64(uint64(t.info.Offset))
	}
	e.pad(w.alignment)
	if e.err != nil {
		return fmt.Errorf("gguf: writer: %s: header: %w", path, e.err)
	}
	dataStart := e.n
	for _, t := range w.tensors {
		if e.n-dataStart != t.info.Offset {
			return fmt.Errorf("gguf: writer: %s: tensor %q: at data offset %d, want %d", path, t.info.Name, e.n-dataStart, t.info.Offset)
		}
		cw := &exactWriter{w: bw, left: t.info.Size}
		if err := t.write(cw); err != nil {
			return fmt.Errorf("gguf: writer: %s: tensor %q: %w", path, t.info.Name, err)
		}
		if cw.left != 0 {
			return fmt.Errorf("gguf: writer: %s: tensor %q: write produced %d bytes, want %d", path, t.info.Name, t.info.Size-cw.left, t.info.Size)
		}
		e.n += t.info.Size
		e.pad(w.alignment)
		if e.err != nil {
			return fmt.Errorf("gguf: writer: %s: tensor %q: %w", path, t.info.Name, e.err)
		}
	}
	return nil
}

// exactWriter passes through at most left bytes and refuses more.
type exactWriter struct {
	w    io.Writer
	left int64
}

func (x *exactWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > x.left {
		return 0, fmt.Errorf("write of %d bytes overruns the tensor by %d", len(p), int64(len(p))-x.left)
	}
	n, err := x.w.Write(p)
	x.left -= int64(n)
	return n, err
}

// encoder writes little-endian fields and remembers the first error.
type encoder struct {
	w   io.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(p)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		n, err := io.WriteString(e.w, s)
		e.n += int64(n)
		e.err = err
	}
}

func (e *encoder) pad(a int64) {
	if r := e.n % a; r != 0 {
		e.raw(make([]byte, a-r))
	}
}

// scalar writes a non-array value's payload.
func (e *encoder) scalar(v Value) {
	switch v.Type {
	case TypeUint8, TypeInt8, TypeBool:
		e.u8(uint8(v.bits))
	case TypeUint16, TypeInt16:
		e.u16(uint16(v.bits))
	case TypeUint32, TypeInt32:
		e.u32(uint32(v.bits))
	case TypeUint64, TypeInt64:
		e.u64(v.bits)
	case TypeFloat32:
		e.u32(math.Float32bits(float32(v.f)))
	case TypeFloat64:
		e.u64(math.Float64bits(v.f))
	case TypeString:
		e.str(v.s)
	}
}

// value writes a value's payload (its type id is written by the caller).
func (e *encoder) value(v Value) {
	if v.Type != TypeArray {
		e.scalar(v)
		return
	}
	e.u32(uint32(v.ElemType))
	n := v.Len()
	e.u64(uint64(n))
	for i := range n {
		e.value(v.elem(i))
	}
}
