package cli

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"strata/engine/experts"
	"strata/engine/gguf"
)

// TestCommandsTakeASplitModel: plan, pack and profile take the first part of a model split
// in three and give what they give for the single file.
func TestCommandsTakeASplitModel(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	whole := synthTiny(t)
	f, err := gguf.Open(whole)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := gguf.WriteSplit(f, filepath.Join(t.TempDir(), "tiny"), 3)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	first := parts[0]

	pw, code, errs := planCLI(t, "-m", whole, "--backend", "cpu")
	if code != 0 {
		t.Fatalf("plan of the whole: %s", errs)
	}
	ps, code, errs := planCLI(t, "-m", first, "--backend", "cpu")
	if code != 0 {
		t.Fatalf("plan of the split model: %s", errs)
	}
	if !maps.Equal(pw.Tiers, ps.Tiers) || !maps.Equal(pw.Bytes, ps.Bytes) {
		t.Errorf("plan of the split model: tiers %v bytes %v; whole: %v %v", ps.Tiers, ps.Bytes, pw.Tiers, pw.Bytes)
	}

	dir := filepath.Join(t.TempDir(), "pack")
	if _, stderr, err := packCLI("-m", first, "-o", dir); err != nil {
		t.Fatalf("pack of the split model: %v\n%s", err, stderr)
	}
	sf, err := gguf.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	l, err := experts.OpenPack(filepath.Join(dir, experts.PackFile), sf)
	if err != nil {
		t.Fatalf("the split model's pack does not open: %v", err)
	}
	l.Close()

	out := filepath.Join(t.TempDir(), "split.profile")
	if code, _, errs := runCLI(t, "profile", "-m", first, "-o", out, "--backend", "cpu", "--threads", "2", "--max-context", "32"); code != 0 {
		t.Fatalf("profile of the split model: exit %d: %s", code, errs)
	}
	p, err := experts.LoadProfile(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Key != experts.ModelKey(sf) || p.Tokens == 0 {
		t.Errorf("profile key %s (%d tokens), the split model's is %s", p.Key, p.Tokens, experts.ModelKey(sf))
	}
	if _, err := os.Stat(parts[2]); err != nil {
		t.Fatal(err)
	}
}
