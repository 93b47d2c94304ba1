package gguf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Split models. The larger published GGUFs come in parts named
// PREFIX-00001-of-00003.gguf, written by llama.cpp's gguf-split: every part is a whole GGUF
// file; the first carries all the model's metadata, every part carries split.no (0-based),
// split.count and split.tensors.count, and each tensor lies whole in one part with its
// offset relative to that part's data section. Open and OpenUnmapped take the first part
// and open the others beside it, so the File lists every tensor and TensorInfo.Part says
// which file holds it.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
	maxSplitCount   = 99999 // the five digits of the names
)

// SplitPath is the name of part i (0-based) of a model split into n parts.
func SplitPath(prefix string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n)
}

// ParseSplitPath splits a part's name into its prefix, its 0-based index and the part
// count; ok is false for a name not in the PREFIX-00001-of-00003.gguf form.
func ParseSplitPath(path string) (prefix string, i, n int, ok bool) {
	base, found := strings.CutSuffix(path, ".gguf")
	if !found {
		return "", 0, 0, false
	}
	// PREFIX-NNNNN-of-NNNNN: 5 + 4 + 5 characters after the prefix's dash.
	const tail = len("-00001-of-00003")
	L := len(base)
	if L <= tail || base[L-tail] != '-' || base[L-9:L-5] != "-of-" || !digits(base[L-14:L-9]) || !digits(base[L-5:]) {
		return "", 0, 0, false
	}
	no, err1 := strconv.Atoi(base[L-14 : L-9])
	count, err2 := strconv.Atoi(base[L-5:])
	if err1 != nil || err2 != nil || no < 1 || count < 1 || no > count {
		return "", 0, 0, false
	}
	return base[:L-tail], no - 1, count, true
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// SplitParts lists the paths of every part of the model whose first part is path: just
// path for a file whose name is not a part's name.
func SplitParts(path string) []string {
	prefix, _, n, ok := ParseSplitPath(path)
	if !ok {
		return []string{path}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = SplitPath(prefix, i, n)
	}
	return out
}

// PartCount is how many files the model is split into (1 for a single file).
func (f *File) PartCount() int { return 1 + len(f.parts) }

// Part is file i of a split model (0: f itself), whose DataOffset a tensor with Part i is
// relative to; nil for an index out of range.
func (f *File) Part(i int) *File {
	switch {
	case i == 0:
		return f
	case i > 0 && i <= len(f.parts):
		return f.parts[i-1]
	}
	return nil
}

// TotalSize is the size in bytes of every part together.
func (f *File) TotalSize() int64 {
	n := f.size
	for _, p := range f.parts {
		n += p.size
	}
	return n
}

// openParts opens the other parts of a split model whose first part f is, with open (Open
// or OpenUnmapped), and adds their tensors to f. A file that is not split is left alone.
func (f *File) openParts(open func(string) (*File, error)) (err error) {
	v, ok := f.Lookup(KeySplitCount)
	if !ok {
		return nil
	}
	n, ok := v.Uint()
	if !ok || n == 0 || n > maxSplitCount {
		return fmt.Errorf("gguf: %s: %s is %s %s, want a count of parts between 1 and %d", f.Path, KeySplitCount, v.Type, v, maxSplitCount)
	}
	no, err := f.GetUint(KeySplitNo)
	if err != nil {
		return err
	}
	if no != 0 {
		return fmt.Errorf("gguf: %s is part %d of %d of a split model: open the first part, %s", f.Path, no+1, n,
			filepath.Base(SplitPath(splitPrefixOr(f.Path), 0, int(n))))
	}
	if n == 1 {
		return nil
	}
	prefix, i0, count, named := ParseSplitPath(f.Path)
	if !named || i0 != 0 || count != int(n) {
		return fmt.Errorf("gguf: %s holds part 1 of %d of a split model, but its name does not end in -00001-of-%05d.gguf, so the other parts cannot be found", f.Path, n, n)
	}
	defer func() {
		if err != nil {
			for _, p := range f.parts {
				p.Close()
			}
			f.parts = nil
		}
	}()
	for i := 1; i < int(n); i++ {
		path := SplitPath(prefix, i, int(n))
		p, err := open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("gguf: %s: part %d of %d, %s, is missing", f.Path, i+1, n, path)
		}
		if err != nil {
			return fmt.Errorf("gguf: %s: part %d of %d: %w", f.Path, i+1, n, err)
		}
		f.parts = append(f.parts, p)
		pno, err1 := p.GetUint(KeySplitNo)
		pn, err2 := p.GetUint(KeySplitCount)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("gguf: %s: part %d of %d is not a part of a split model: %w", f.Path, i+1, n, err)
		}
		if pno != uint64(i) || pn != n {
			return fmt.Errorf("gguf: %s: part %d of %d does not belong to this set: it says it is part %d of %d", path, i+1, n, pno+1, pn)
		}
		if a, b := f.splitTensors(), p.splitTensors(); a != b {
			return fmt.Errorf("gguf: %s: part %d of %d says its model has %s tensors, the first part %s (a part from another model?)", path, i+1, n, b, a)
		}
		for _, t := range p.Tensors {
			if _, dup := f.byName[t.Name]; dup {
				return fmt.Errorf("gguf: %s: tensor %q is in an earlier part too", path, t.Name)
			}
			t.Part = i
			f.byName[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
	}
	want, err := f.GetUint(KeySplitTensors)
	if err != nil {
		return err
	}
	if want != uint64(len(f.Tensors)) {
		return fmt.Errorf("gguf: %s: %s says the model has %d tensors, but its %d parts hold %d (a part from another model?)", f.Path, KeySplitTensors, want, n, len(f.Tensors))
	}
	return nil
}

// splitTensors is the split.tensors.count value as written, for comparing parts.
func (f *File) splitTensors() string {
	v, ok := f.Lookup(KeySplitTensors)
	if !ok {
		return "no " + KeySplitTensors
	}
	return v.String()
}

// splitPrefixOr is the prefix of a part's name, or the name without .gguf.
func splitPrefixOr(path string) string {
	if prefix, _, _, ok := ParseSplitPath(path); ok {
		return prefix
	}
	return strings.TrimSuffix(path, ".gguf")
}

// WriteSplit writes the mapped file f as n parts named SplitPath(prefix, i, n) in the
// layout of llama.cpp's gguf-split: the first part has all of f's metadata, every part has
// split.no, split.count and split.tensors.count, and the tensors, in f's order, go whole
// into the parts, as evenly by count as they divide. It returns the parts' paths.
func WriteSplit(f *File, prefix string, n int) ([]string, error) {
	if n < 1 || n > maxSplitCount || n > len(f.Tensors) {
		return nil, fmt.Errorf("gguf: split %s into %d parts: want between 1 and %d (one tensor a part at least)", f.Path, n, min(len(f.Tensors), maxSplitCount))
	}
	if !f.Mapped() {
		return nil, fmt.Errorf("gguf: split %s: the file is not mapped", f.Path)
	}
	var paths []string
	next := 0
	for i := range n {
		w := NewWriter()
		w.SetAlignment(f.Alignment)
		if i == 0 {
			for _, kv := range f.KV {
				if !strings.HasPrefix(kv.Key, "split.") {
					w.Add(kv.Key, kv.Value)
				}
			}
		}
		w.Add(KeySplitNo, NewUint16(uint16(i)))
		w.Add(KeySplitCount, NewUint16(uint16(n)))
		w.Add(KeySplitTensors, NewInt32(int32(len(f.Tensors))))
		end := len(f.Tensors) * (i + 1) / n
		for _, t := range f.Tensors[next:end] {
			data := f.TensorData(t)
			if data == nil {
				return nil, fmt.Errorf("gguf: split %s: tensor %q has no data", f.Path, t.Name)
			}
			w.AddTensor(t.Name, t.Type, t.Ne, func(out io.Writer) error {
				_, err := out.Write(data)
				return err
			})
		}
		next = end
		path := SplitPath(prefix, i, n)
		if err := w.WriteFile(path); err != nil {
			return nil, fmt.Errorf("gguf: split %s: %w", f.Path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
