package experts

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
	"strata/engine/synth"
)

// handModel describes a small GGUF written byte by byte: F32 expert tensors of odd sizes
// (so extents are not aligned), with the experts last so the file ends inside one.
type handModel struct {
	layers, experts int
	rows, cols      int64 // gate/up are [cols, rows, E], down [rows, cols, E]
	seed            uint64
	// downCols, when set, gives layer 1's down tensor another row length (a mixed model).
	downCols int64
	// skip leaves this tensor out.
	skip string
}

func (h handModel) write(t testing.TB, path string) string {
	t.Helper()
	w := gguf.NewWriter()
	w.AddString("general.architecture", "qwen3moe")
	w.AddUint32("qwen3moe.block_count", uint32(h.layers))
	w.AddUint32("qwen3moe.expert_count", uint32(h.experts))
	rng := rand.New(rand.NewPCG(h.seed, 7))
	fill := func(n int64) func(io.Writer) error {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	E := int64(h.experts)
	if err := w.AddTensor("token_embd.weight", quant.F32, []int64{7, 3}, fill(7*3*4)); err != nil {
		t.Fatal(err)
	}
	for l := range h.layers {
		names := model.ExpertTensors(l)
		for p, name := range names {
			ne := []int64{h.cols, h.rows, E}
			if p == 2 {
				ne = []int64{h.rows, h.cols, E}
				if l == 1 && h.downCols > 0 {
					ne[0] = h.downCols
				}
			}
			if name == h.skip {
				continue
			}
			if err := w.AddTensor(name, quant.F32, ne, fill(ne[0]*ne[1]*E*4)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// synthModel writes a small synthetic qwen3moe (3 layers of 16 Q4_K experts).
func synthModel(t testing.TB, dir string) string {
	t.Helper()
	return synthModelSeed(t, dir, 1)
}

// synthModelSeed writes synthModel's model with the weights of another seed: the same
// tensor index, other bytes.
func synthModelSeed(t testing.TB, dir string, seed uint64) string {
	t.Helper()
	s, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Layers, s.Experts, s.Pool, s.Seed = 3, 16, 256, seed
	path := filepath.Join(dir, "synth.gguf")
	if err := synth.Write(context.Background(), path, s, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// fixtureModels lists every GGUF file of the shared fixtures.
func fixtureModels(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtures.Dir(t), "*", "*.gguf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no GGUF files in the fixtures (%v)", err)
	}
	return paths
}

// testModels is every model the layout tests run on: the fixtures, a synthetic model and
// two hand-made ones (odd sizes, experts at the end of the file; parts larger than a
// small read).
func testModels(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	m := map[string]string{}
	for _, p := range fixtureModels(t) {
		m[filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)] = p
	}
	m["synth"] = synthModel(t, dir)
	m["hand-odd"] = handModel{layers: 2, experts: 5, rows: 3, cols: 5, seed: 1}.write(t, filepath.Join(dir, "odd.gguf"))
	m["hand-big"] = handModel{layers: 2, experts: 4, rows: 48, cols: 64, seed: 2}.write(t, filepath.Join(dir, "big.gguf"))
	return m
}

// wantBlob cuts expert id out of the stacked tensors directly, independently of Layout.
func wantBlob(t testing.TB, f *gguf.File, id ID) [3][]byte {
	t.Helper()
	E, err := f.ArchUint("expert_count")
	if err != nil {
		t.Fatal(err)
	}
	var out [3][]byte
	for p, name := range model.ExpertTensors(id.Layer) {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s: no tensor %s", f.Path, name)
		}
		d := f.TensorData(ti)
		n := int64(len(d)) / int64(E)
		out[p] = d[int64(id.Expert)*n : int64(id.Expert+1)*n]
	}
	return out
}

func allIDs(s Shape) []ID {
	var ids []ID
	for l := range s.Layers {
		for e := range s.Experts {
			ids = append(ids, ID{l, e})
		}
	}
	return ids
}

func TestGGUFLayout(t *testing.T) {
	for name, path := range testModels(t) {
		t.Run(name, func(t *testing.T) {
			f := openGGUF(t, path)
			l, err := GGUFLayout(f)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			layers, _ := f.ArchUint("block_count")
			E, _ := f.ArchUint("expert_count")
			if l.Shape.Layers != int(layers) || l.Shape.Experts != int(E) || l.Path != path {
				t.Fatalf("shape %+v path %s", l.Shape, l.Path)
			}
			st, _ := os.Stat(path)
			if l.FileSize() != st.Size() {
				t.Errorf("file size %d, want %d", l.FileSize(), st.Size())
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range allIDs(l.Shape) {
				want := wantBlob(t, f, id)
				g, u, d := l.Blob(id)
				parts := l.Parts(id)
				for p, got := range [3][]byte{g, u, d} {
					if !bytes.Equal(got, want[p]) {
						t.Fatalf("%s %s: blob bytes differ from the tensor", id, partName(p))
					}
					e := parts[p]
					if !bytes.Equal(raw[e.Offset:e.End()], want[p]) {
						t.Fatalf("%s %s: extent %+v does not hold the part in the file", id, partName(p), e)
					}
				}
				if int64(len(g)+len(u)+len(d)) != l.Shape.BlobBytes() {
					t.Fatalf("%s: %d bytes, shape says %d", id, len(g)+len(u)+len(d), l.Shape.BlobBytes())
				}
			}
			for _, bad := range []ID{{-1, 0}, {0, -1}, {l.Shape.Layers, 0}, {0, l.Shape.Experts}} {
				if g, u, d := l.Blob(bad); g != nil || u != nil || d != nil || l.Parts(bad) != ([3]Extent{}) {
					t.Errorf("%s: got bytes for an expert outside the model", bad)
				}
			}
		})
	}
}

// TestMixedExpertSizes: a quantisation mix stores layers' experts in different sizes. The
// GGUF layout and the arena keep each layer's own sizes (the shape the widest); experts.bin,
// one blob size for all, refuses such a model clearly.
func TestMixedExpertSizes(t *testing.T) {
	dir := t.TempDir()
	path := handModel{layers: 2, experts: 4, rows: 3, cols: 5, downCols: 4}.write(t, filepath.Join(dir, "mixed.gguf"))
	f := openGGUF(t, path)
	l, err := GGUFLayout(f)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, unbuffered := range []bool{false, true} {
		o := DefaultFillOptions()
		o.Unbuffered = unbuffered
		a, _, err := FillArena(t.Context(), l, allIDs(l.Shape), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range allIDs(l.Shape) {
			want := wantBlob(t, f, id)
			g, u, d := l.Blob(id)
			ag, au, ad, ok := a.Blob(id)
			if !ok {
				t.Fatalf("%s is not in the arena", id)
			}
			for p, got := range [][]byte{g, u, d, ag, au, ad} {
				if !bytes.Equal(got, want[p%3]) {
					t.Fatalf("%s %s (unbuffered %v): bytes differ from the tensor", id, partName(p%3), unbuffered)
				}
			}
		}
		a.Close()
	}
	if _, err := Pack(t.Context(), f, dir, nil); err == nil || !strings.Contains(err.Error(), "different types") {
		t.Errorf("pack of a mixed model: %v, want a clear refusal", err)
	}
}

func TestGGUFLayoutErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		m    handModel
		want string
	}{
		{"missing tensor", handModel{layers: 2, experts: 4, rows: 3, cols: 5, skip: "blk.1.ffn_up_exps.weight"}, `tensor "blk.1.ffn_up_exps.weight" is missing`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.m.write(t, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".gguf"))
			_, err := GGUFLayout(openGGUF(t, path))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, path, c.want)
			}
		})
	}
	// Metadata that is not a MoE: a wrong expert count and a missing one.
	for _, c := range []struct {
		name  string
		count uint32
		want  string
	}{{"wrong count", 3, "want 3 dimensions with 3 experts last"}, {"no count", 0, "expert_count"}} {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			w.AddString("general.architecture", "qwen3moe")
			w.AddUint32("qwen3moe.block_count", 1)
			if c.count > 0 {
				w.AddUint32("qwen3moe.expert_count", c.count)
			}
			for _, name := range model.ExpertTensors(0) {
				w.AddTensor(name, quant.F32, []int64{4, 2, 4}, func(w io.Writer) error { _, err := w.Write(make([]byte, 128)); return err })
			}
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			_, err := GGUFLayout(openGGUF(t, path))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
