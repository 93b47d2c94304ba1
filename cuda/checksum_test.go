package cuda_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"strata/cuda"
)

// TestFatbinMatchesSources fails when cuda/kernels/*.cu* changed after kernels.fatbin.gz was
// built: kernels.sha256 (written by `make kernels` next to the fatbin) must list exactly
// the current sources with their current hashes.
func TestFatbinMatchesSources(t *testing.T) {
	want := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(cuda.EmbeddedChecksum()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("kernels.sha256: malformed line %q", sc.Text())
		}
		want[strings.TrimPrefix(f[1], "*")] = f[0]
	}
	srcs, err := filepath.Glob(filepath.Join("kernels", "*.cu*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Fatal("no kernel sources under cuda/kernels")
	}
	sort.Strings(srcs)
	got := map[string]string{}
	for _, p := range srcs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		got[filepath.Base(p)] = hex.EncodeToString(h[:])
	}
	for name, h := range got {
		if want[name] != h {
			t.Errorf("kernels/%s changed since kernels.fatbin.gz was built (checksum %s, fatbin built from %q): run make kernels on the GPU machine", name, h, want[name])
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("kernels.sha256 lists %s, which is no longer a source: rebuild the fatbin", name)
		}
	}
	if fi, err := os.Stat("kernels.fatbin.gz"); err != nil || fi.Size() == 0 {
		t.Errorf("kernels.fatbin.gz is missing or empty: run make kernels")
	}
}
