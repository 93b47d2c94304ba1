package library

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	files := []RepoFile{
		{Path: "README.md", Size: 10},
		{Path: "m-Q4_K_M.gguf", Size: 100},
		{Path: "Q8_0/m-Q8_0-00001-of-00002.gguf", Size: 200},
		{Path: "Q8_0/m-Q8_0-00002-of-00002.gguf", Size: 150},
		{Path: "m-Q4_K_S.gguf", Size: 90},
	}
	models := GGUFModels(files)
	if len(models) != 3 {
		t.Fatalf("models %+v", models)
	}
	for _, c := range []struct {
		file, want, err string
	}{
		{"q8_0", "Q8_0/m-Q8_0-00001-of-00002.gguf", ""},
		{"m-Q8_0-00002-of-00002.gguf", "Q8_0/m-Q8_0-00001-of-00002.gguf", ""},
		{"Q4_K_M", "m-Q4_K_M.gguf", ""},
		{"Q4_K", "", "matches 2 models"},
		{"IQ2", "", "no GGUF model matching"},
		{"", "", "has 3 GGUF models"},
	} {
		m, err := Choose("o/r", models, c.file)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "m-Q4_K_S.gguf") && c.file != "Q4_K" {
				t.Errorf("%q: %v, want an error saying %q and listing the models", c.file, err, c.err)
			}
			continue
		}
		if err != nil || m.Name != c.want {
			t.Errorf("%q: %s %v, want %s", c.file, m.Name, err, c.want)
		}
	}
	if m, err := Choose("o/r", models[:1], ""); err != nil || m.Name != models[0].Name {
		t.Errorf("one model: %v", err)
	}
	if _, err := Choose("o/r", nil, ""); err == nil || !strings.Contains(err.Error(), "no GGUF") {
		t.Errorf("no models: %v", err)
	}
	if repo, file, err := ParseRef("o/r:Q4_K_M"); repo != "o/r" || file != "Q4_K_M" || err != nil {
		t.Errorf("ParseRef: %q %q %v", repo, file, err)
	}
	if _, _, err := ParseRef("justaname"); err == nil || !strings.Contains(err.Error(), "gpt-oss-20b") {
		t.Errorf("ParseRef took a name without an owner, or did not list the catalogue: %v", err)
	}
	entries, err := Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	if repo, file, err := ParseRef(strings.ToUpper(entries[0].ID)); err != nil || repo != entries[0].Repo || file != entries[0].Quant {
		t.Errorf("catalogue id: %q %q %v, want %s", repo, file, err, entries[0].Ref())
	}
}

// TestLocalModels: the folder's list shows a split model once, with every part's size, its
// architecture and last use, and leaves out partial downloads; Delete removes every part.
func TestLocalModels(t *testing.T) {
	_, c, files := setup(t)
	dir := t.TempDir()
	m := onlyModel(t, c, "strata/tiny-GGUF")
	first, err := c.Download(context.Background(), "strata/tiny-GGUF", m, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.gguf"+PartialSuffix), []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.gguf"), []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	used := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	list, err := LocalModels(context.Background(), dir, func(p string) time.Time {
		if p == first {
			return used
		}
		return time.Time{}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Path != first || list[1].Name() != "broken.gguf" {
		t.Fatalf("list %+v", list)
	}
	if list[0].Size != m.Size() || list[0].Architecture != "qwen3moe" || !list[0].LastUsed.Equal(used) || len(list[0].Parts) != 3 {
		t.Errorf("model %+v (size want %d)", list[0], m.Size())
	}
	if list[1].Err == nil || list[1].Architecture != "" {
		t.Errorf("a broken file shows %+v", list[1])
	}
	// Any part stands for the model; a part whose first part is gone stays itself.
	if got := FirstPart(list[0].Parts[2]); got != first {
		t.Errorf("FirstPart(%s) = %s", list[0].Parts[2], got)
	}
	if got := FirstPart(first); got != first {
		t.Errorf("FirstPart of the first part: %s", got)
	}
	if err := list[0].Delete(); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s is still there", name)
		}
	}
	if got := FirstPart(list[0].Parts[2]); got != list[0].Parts[2] {
		t.Errorf("FirstPart without a first part: %s", got)
	}
}
