package gguf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/quant"
)

// reference is the part of a fixture folder's reference.json this package checks.
type reference struct {
	Models map[string]struct {
		GGUFMetadata map[string]json.RawMessage `json:"gguf_metadata"`
	} `json:"models"`
	Variants map[string]struct {
		File      string `json:"file"`
		Model     string `json:"model"`
		Bytes     int64  `json:"bytes"`
		SHA256    string `json:"sha256"`
		Alignment int64  `json:"alignment"`
		Tensors   []struct {
			Name   string  `json:"name"`
			Type   string  `json:"type"`
			Ne     []int64 `json:"ne"`
			SHA256 string  `json:"sha256_dequant_f32"`
		} `json:"tensors"`
		Readback struct {
			NTensors   int   `json:"n_tensors"`
			NKV        int   `json:"n_kv"`
			DataOffset int64 `json:"data_offset"`
		} `json:"gguf_readback"`
	} `json:"variants"`
}

// TestFixtures opens every GGUF the fixtures' reference.json files list and checks every
// tensor (name, order, type, ne, and the bytes of the F32 ones) and every metadata key.
func TestFixtures(t *testing.T) {
	dir := fixtures.Dir(t)
	refs, err := filepath.Glob(filepath.Join(dir, "*", "reference.json"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no reference.json under %s (%v)", dir, err)
	}
	files := 0
	for _, refPath := range refs {
		raw, err := os.ReadFile(refPath)
		if err != nil {
			t.Fatal(err)
		}
		var ref reference
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatalf("%s: %v", refPath, err)
		}
		for name, v := range ref.Variants {
			path := filepath.Join(filepath.Dir(refPath), v.File)
			t.Run(filepath.Base(filepath.Dir(refPath))+"/"+name, func(t *testing.T) {
				files++
				f, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				st, err := os.Stat(path)
				if err != nil || st.Size() != v.Bytes {
					t.Fatalf("file size %v, want %d (%v)", st.Size(), v.Bytes, err)
				}
				if f.Version != 3 || f.Alignment != v.Alignment || f.DataOffset != v.Readback.DataOffset {
					t.Errorf("version %d alignment %d data offset %d, want 3 %d %d", f.Version, f.Alignment, f.DataOffset, v.Alignment, v.Readback.DataOffset)
				}
				if len(f.KV) != v.Readback.NKV || len(f.Tensors) != v.Readback.NTensors || len(f.Tensors) != len(v.Tensors) {
					t.Fatalf("%d keys %d tensors, want %d and %d", len(f.KV), len(f.Tensors), v.Readback.NKV, v.Readback.NTensors)
				}
				for i, want := range v.Tensors {
					got := f.Tensors[i]
					if got.Name != want.Name || got.Type.String() != want.Type || !equalInts(got.Ne, want.Ne) {
						t.Errorf("tensor %d: %s %s %v, want %s %s %v", i, got.Name, got.Type, got.Ne, want.Name, want.Type, want.Ne)
						continue
					}
					data := f.TensorData(got)
					rb, err := quant.RowBytes(got.Type, int(got.Ne[0]))
					if err != nil || int64(len(data)) != got.Rows()*int64(rb) {
						t.Errorf("tensor %s: %d bytes of data, want %d rows of %d (%v)", got.Name, len(data), got.Rows(), rb, err)
					}
					// The reference hashes gguf-py's dequantisation (float32 LE); F32 bytes
					// are their own, and quant's dequantisers are bit-exact with gguf-py.
					if h := sha256.Sum256(dequantBytes(t, got.Type, data, got.Elements())); hex.EncodeToString(h[:]) != want.SHA256 {
						t.Errorf("tensor %s (%s): sha256 of the dequantised data differs from the reference", got.Name, got.Type)
					}
				}
				meta := ref.Models[v.Model].GGUFMetadata
				if len(meta) == 0 {
					t.Fatalf("reference has no metadata for model %q", v.Model)
				}
				for key, want := range meta {
					if err := checkKey(f, key, want); err != nil {
						t.Errorf("key %s: %v", key, err)
					}
				}
				if f.Architecture() == "" {
					t.Error("no architecture")
				}
			})
		}
	}
	if files == 0 {
		t.Fatal("reference.json files list no GGUF file")
	}
}

// dequantBytes is data dequantised to float32, little-endian.
func dequantBytes(t *testing.T, typ quant.Type, data []byte, n int64) []byte {
	t.Helper()
	if typ == quant.F32 {
		return data
	}
	vals := make([]float32, n)
	if err := quant.Dequantize(typ, data, vals); err != nil {
		t.Fatalf("dequantise %s: %v", typ, err)
	}
	out := make([]byte, 4*n)
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

// checkKey compares one metadata key with its reference.json value.
func checkKey(f *File, key string, raw json.RawMessage) error {
	// The reference describes the dummy vocabularies in words rather than listing them.
	tokensDesc := regexp.MustCompile(`^\['<t0>', \.\.\., '<t(\d+)>', '([^']+)'\]$`)
	const tokenTypeDesc = "1 (NORMAL) for all but the last id, 3 (CONTROL) for the last"
	v, ok := f.Lookup(key)
	var want any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		return err
	}
	if s, isStr := want.(string); isStr {
		switch {
		case strings.HasPrefix(s, "(absent"):
			if ok {
				return fmt.Errorf("present (%s), reference says %s", v, s)
			}
			return nil
		case key == "tokenizer.ggml.tokens" && tokensDesc.MatchString(s):
			m := tokensDesc.FindStringSubmatch(s)
			last, _ := strconv.Atoi(m[1])
			toks, ok := v.Strings()
			if !ok || len(toks) != last+2 {
				return fmt.Errorf("%d tokens, want %d", len(toks), last+2)
			}
			for i := 0; i <= last; i++ {
				if toks[i] != fmt.Sprintf("<t%d>", i) {
					return fmt.Errorf("token %d is %q", i, toks[i])
				}
			}
			if toks[last+1] != m[2] {
				return fmt.Errorf("last token %q, want %q", toks[last+1], m[2])
			}
			return nil
		case key == "tokenizer.ggml.token_type" && s == tokenTypeDesc:
			types, ok := v.Ints()
			if !ok || len(types) == 0 {
				return fmt.Errorf("not an integer array: %s", v)
			}
			for i, ty := range types {
				if w := int64(1 + 2*boolInt(i == len(types)-1)); ty != w {
					return fmt.Errorf("token_type[%d] = %d, want %d", i, ty, w)
				}
			}
			return nil
		}
	}
	if !ok {
		return fmt.Errorf("missing")
	}
	return matchJSON(v, want)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// matchJSON compares a value with a decoded JSON value of the same kind. A float key
// stored as float32 is compared at float32 precision.
func matchJSON(v Value, want any) error {
	switch w := want.(type) {
	case string:
		if s, ok := v.Str(); !ok || s != w {
			return fmt.Errorf("%s, want %q", v, w)
		}
	case bool:
		if b, ok := v.Bool(); !ok || b != w {
			return fmt.Errorf("%s, want %v", v, w)
		}
	case json.Number:
		if n, err := w.Int64(); err == nil && !strings.ContainsAny(w.String(), ".eE") {
			if got, ok := v.Int(); !ok || got != n {
				return fmt.Errorf("%s (%s), want integer %d", v, v.Type, n)
			}
			return nil
		}
		x, err := w.Float64()
		got, ok := v.Float()
		if err != nil || !ok || !v.Type.isFloat() {
			return fmt.Errorf("%s (%s), want float %s", v, v.Type, w)
		}
		if v.Type == TypeFloat32 && float32(got) != float32(x) || v.Type == TypeFloat64 && got != x {
			return fmt.Errorf("%s, want %s", v, w)
		}
	case []any:
		elems, ok := v.Array()
		if !ok || len(elems) != len(w) {
			return fmt.Errorf("%s, want %d elements", v, len(w))
		}
		for i := range w {
			if err := matchJSON(elems[i], w[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	default:
		return fmt.Errorf("reference value %v of type %T is not handled", want, want)
	}
	return nil
}
