package experts

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"strata/engine/gguf"
)

var testShape = Shape{Layers: 3, Experts: 4, GateBytes: 10, UpBytes: 10, DownBytes: 12}

func TestObserveAndAdd(t *testing.T) {
	p := NewProfile("k", testShape)
	p.Observe(1, []int32{2, 3}, []float32{0.75, 0.25})
	p.Observe(1, []int32{2, 0}, []float32{0.5, 0.5})
	// Out of range: skipped, nothing else is touched.
	p.Observe(3, []int32{0}, []float32{1})
	p.Observe(-1, []int32{0}, []float32{1})
	p.Observe(0, []int32{4, -1}, []float32{1, 1})
	// Fewer weights than ids: the count still goes up.
	p.Observe(2, []int32{1, 1}, []float32{0.5})
	want := make([]uint64, 12)
	want[1*4+2], want[1*4+3], want[1*4+0], want[2*4+1] = 2, 1, 1, 2
	if !reflect.DeepEqual(p.Count, want) {
		t.Fatalf("counts %v, want %v", p.Count, want)
	}
	if p.Weight[1*4+2] != 1.25 || p.Weight[2*4+1] != 0.5 || p.Weight[1*4+3] != 0.25 {
		t.Fatalf("weights %v", p.Weight)
	}
	p.Tokens = 2

	q := NewProfile("k", testShape)
	q.Observe(0, []int32{1}, []float32{1})
	q.Tokens = 1
	if err := p.Add(q); err != nil {
		t.Fatal(err)
	}
	if p.Count[1] != 1 || p.Count[1*4+2] != 2 || p.Tokens != 3 || p.Weight[1] != 1 {
		t.Fatalf("after Add: counts %v weights %v tokens %d", p.Count, p.Weight, p.Tokens)
	}

	for _, tc := range []struct {
		o    *Profile
		want string
	}{
		{nil, "nil profile"},
		{NewProfile("other", testShape), "different models"},
		{NewProfile("k", Shape{Layers: 3, Experts: 5}), "shape 3 layers x 5 experts"},
	} {
		before := p.Clone()
		err := p.Add(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add: error %v, want %q", err, tc.want)
		}
		if !reflect.DeepEqual(before, p) {
			t.Errorf("a failed Add changed the profile")
		}
	}
}

func TestRank(t *testing.T) {
	s := Shape{Layers: 2, Experts: 3, GateBytes: 1}
	neutral := []ID{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}}
	if got := NewProfile("k", s).Rank(); !reflect.DeepEqual(got, neutral) {
		t.Fatalf("empty profile rank %v, want the neutral %v", got, neutral)
	}
	if got := NeutralRank(s); !reflect.DeepEqual(got, neutral) {
		t.Fatalf("NeutralRank %v", got)
	}
	for _, tc := range []struct {
		name   string
		count  []uint64
		weight []float64
		want   []ID
	}{
		{"by count", []uint64{0, 5, 1, 0, 0, 9}, make([]float64, 6),
			[]ID{{1, 2}, {0, 1}, {0, 2}, {0, 0}, {1, 0}, {1, 1}}},
		{"ties by weight", []uint64{3, 3, 0, 3, 0, 0}, []float64{1, 2, 0, 1.5, 0, 0},
			[]ID{{0, 1}, {1, 0}, {0, 0}, {1, 1}, {0, 2}, {1, 2}}},
		{"full ties: neutral order", []uint64{2, 0, 2, 2, 0, 2}, []float64{1, 0, 1, 1, 0, 1},
			[]ID{{0, 0}, {1, 0}, {0, 2}, {1, 2}, {0, 1}, {1, 1}}},
	} {
		p := NewProfile("k", s)
		copy(p.Count, tc.count)
		copy(p.Weight, tc.weight)
		if got := p.Rank(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: rank %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	p := NewProfile("abc", testShape)
	p.Observe(0, []int32{1, 3}, []float32{0.6, 0.4})
	p.Observe(2, []int32{0, 3}, []float32{0.9, 0.1})
	p.Tokens = 1
	path := filepath.Join(dir, "sub", "folder", "m.profile")
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip: got %+v, want %+v", got, p)
	}
	if st, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o644) {
		t.Errorf("saved file: %v, mode %v; want 0644", err, st.Mode())
	}
	// Saving again replaces the file and leaves no temporary files behind.
	p.Tokens = 7
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries after two saves, want 1", len(entries))
	}
	if got, _ := LoadProfile(path); got == nil || got.Tokens != 7 {
		t.Fatalf("second save not read back: %+v", got)
	}
	// A profile that does not check out is not written.
	bad := p.Clone()
	bad.Count = bad.Count[:3]
	if err := bad.Save(filepath.Join(dir, "bad.profile")); err == nil {
		t.Fatal("saving a profile with too few counts succeeded")
	}
}

func TestLoadProfileErrors(t *testing.T) {
	dir := t.TempDir()
	good := NewProfile("abc", Shape{Layers: 1, Experts: 2})
	good.Observe(0, []int32{1}, []float32{1})
	goodPath := filepath.Join(dir, "good.profile")
	if err := good.Save(goodPath); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"truncated", string(data[:len(data)/2]), "truncated or corrupt"},
		{"empty", "", "truncated or corrupt"},
		{"garbage", "\x00\x01binary", "truncated or corrupt"},
		{"other version", `{"version":2,"key":"abc","layers":1,"experts":2,"count":[0,1],"weight":[0,1]}`, "version 2"},
		{"no version", `{"key":"abc","layers":1,"experts":2,"count":[0,1],"weight":[0,1]}`, "version 0"},
		{"short counts", `{"version":1,"key":"abc","layers":1,"experts":2,"count":[0],"weight":[0,1]}`, "1 counts and 2 weights"},
		{"long weights", `{"version":1,"key":"abc","layers":1,"experts":2,"count":[0,1],"weight":[0,1,2]}`, "2 counts and 3 weights"},
		{"no shape", `{"version":1,"key":"abc","layers":0,"experts":2,"count":[],"weight":[]}`, "0 layers x 2 experts"},
		{"negative weight", `{"version":1,"key":"abc","layers":1,"experts":2,"count":[0,1],"weight":[0,-1]}`, "layer 0 expert 1 is -1"},
		{"negative count", `{"version":1,"key":"abc","layers":1,"experts":2,"count":[0,-1],"weight":[0,1]}`, "truncated or corrupt"},
		{"no key", `{"version":1,"layers":1,"experts":2,"count":[0,1],"weight":[0,1]}`, "no model key"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".profile")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := LoadProfile(path)
		if err == nil {
			t.Errorf("%s: loaded %+v", tc.name, p)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %q does not name the file and say %q", tc.name, err, tc.want)
		}
	}
	if _, err := LoadProfile(filepath.Join(dir, "absent.profile")); err == nil || !strings.Contains(err.Error(), "absent.profile") {
		t.Errorf("missing file: %v", err)
	}
}

func TestFindAndSaveProfile(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux
	t.Setenv("LocalAppData", cache)   // on Windows
	t.Setenv("HOME", cache)           // on macOS (Library/Caches)
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	paths := ProfilePaths(model, "key1")
	if len(paths) != 2 || paths[0] != model+".strata-profile" || !strings.HasSuffix(paths[1], filepath.Join("strata", "profiles", "key1.profile")) {
		t.Fatalf("ProfilePaths = %v", paths)
	}

	if p, path, err := FindProfile(model, "key1"); p != nil || path != "" || err != nil {
		t.Fatalf("no profile yet: got %v %q %v", p, path, err)
	}
	p := NewProfile("key1", testShape)
	p.Observe(0, []int32{1}, []float32{1})
	at, err := SaveProfile(p, model)
	if err != nil || at != paths[0] {
		t.Fatalf("SaveProfile = %q, %v; want %q", at, err, paths[0])
	}
	got, path, err := FindProfile(model, "key1")
	if err != nil || path != paths[0] || got == nil || got.Count[1] != 1 {
		t.Fatalf("FindProfile = %v, %q, %v", got, path, err)
	}
	// Another model's profile next to the file is passed over, and said so.
	if got, _, err := FindProfile(model, "key2"); got != nil || err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("key mismatch: %v, %v", got, err)
	}

	// A read-only model folder: the profile goes to the cache folder.
	roDir := filepath.Join(dir, "ro")
	if err := os.Mkdir(roDir, 0o555); err != nil {
		t.Fatal(err)
	}
	roModel := filepath.Join(roDir, "m.gguf")
	if os.Getuid() == 0 {
		// Root ignores permissions; make the first place unusable by putting a folder there.
		if err := os.Mkdir(roModel+".strata-profile", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	q := NewProfile("key3", testShape)
	at, err = SaveProfile(q, roModel)
	want := ProfilePaths(roModel, "key3")[1]
	if err != nil || at != want {
		t.Fatalf("SaveProfile in a read-only folder = %q, %v; want %q", at, err, want)
	}
	if got, path, err := FindProfile(roModel, "key3"); got == nil || path != want {
		t.Fatalf("FindProfile from the cache = %v, %q, %v", got, path, err)
	}
	// A corrupt file in the first place does not hide the good one in the second.
	if os.Getuid() != 0 {
		if err := os.Chmod(roDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(roModel+".strata-profile", []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, path, err := FindProfile(roModel, "key3"); got == nil || path != want || err != nil {
			t.Fatalf("corrupt first file: %v, %q, %v", got, path, err)
		}
	}
}

// TestModelKey: every fixture model file has its own stable key (the files differ in tensor
// types or shapes).
func TestModelKey(t *testing.T) {
	paths := fixtureModels(t)
	if len(paths) < 2 {
		t.Fatalf("need two fixture models, found %v", paths)
	}
	keys := map[string]string{}
	for _, p := range paths {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		k := ModelKey(f)
		f.Close()
		if other, dup := keys[k]; dup {
			t.Errorf("%s and %s have the same key %s", other, p, k)
		}
		keys[k] = p
	}
	f32, err := gguf.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f32.Close()
	q8, err := gguf.Open(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	defer q8.Close()
	k1, k2 := ModelKey(f32), ModelKey(q8)
	if len(k1) != 32 || strings.Trim(k1, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not 32 hex digits", k1)
	}
	if k1 == k2 {
		t.Fatal("two models have the same key")
	}
	if again := ModelKey(f32); again != k1 {
		t.Fatalf("key not stable: %q then %q", k1, again)
	}
	// One tensor's offset moved: another key.
	moved := *f32
	moved.Tensors = append([]gguf.TensorInfo(nil), f32.Tensors...)
	moved.Tensors[len(moved.Tensors)-1].Offset += 32
	if ModelKey(&moved) == k1 {
		t.Fatal("moving a tensor kept the key")
	}
}
