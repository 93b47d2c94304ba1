package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/quant"
	"strata/engine/synth"
)

// TestHybridProfilePackPlan runs `strata profile`, `strata pack` and `strata plan` on tiny
// synthetic qwen35moe and qwen3next models: the profile counts the routed experts of every
// layer (the DeltaNet layers' included), the pack holds one blob a routed expert with the
// model's bytes, and neither they nor the plan's tiers count the shared experts, which stay
// with the non-expert weights.
func TestHybridProfilePackPlan(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, arch := range []string{"qwen35moe", "qwen3next"} {
		spec, err := synth.PresetFor(arch, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		spec.Quant, spec.Pool = quant.Q8_0, 64
		dir := t.TempDir()
		model := filepath.Join(dir, arch+".gguf")
		if err := synth.Write(context.Background(), model, spec, nil); err != nil {
			t.Fatal(err)
		}
		info, err := engine.Inspect(context.Background(), model)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(model)
		if err != nil {
			t.Fatal(err)
		}
		var routed, shared int64
		for _, ti := range f.Tensors {
			switch {
			case strings.Contains(ti.Name, "_exps."):
				routed += ti.Size
			case strings.Contains(ti.Name, "_shexp."):
				shared += ti.Size
			}
		}
		count := info.Layers * info.Experts
		if shared == 0 || count == 0 || info.NonExpertBytes < shared {
			t.Fatalf("%s: %d shared-expert bytes, %d routed experts, %d non-expert bytes", arch, shared, count, info.NonExpertBytes)
		}
		blob := routed / int64(count)

		// profile: a short context keeps it quick (every prompt is cut to 15 tokens).
		out := filepath.Join(dir, arch+".profile")
		code, _, errs := runCLI(t, "profile", "-m", model, "-o", out, "--backend", "cpu", "--threads", "2", "--max-context", "16")
		if code != 0 {
			t.Fatalf("%s: profile: exit %d: %s", arch, code, errs)
		}
		p, err := experts.LoadProfile(out)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if p.Layers != info.Layers || p.Experts != info.Experts || p.Tokens == 0 {
			t.Fatalf("%s: profile %d x %d of %d tokens, model %d x %d", arch, p.Layers, p.Experts, p.Tokens, info.Layers, info.Experts)
		}
		for l := range p.Layers {
			var sum uint64
			for _, c := range p.Count[l*p.Experts : (l+1)*p.Experts] {
				sum += c
			}
			if sum != p.Tokens*uint64(info.ExpertsUsed) {
				t.Errorf("%s: layer %d: %d routes for %d tokens x %d experts", arch, l, sum, p.Tokens, info.ExpertsUsed)
			}
		}

		// pack: one blob a routed expert, the model's bytes, no shared expert.
		packDir := filepath.Join(dir, "pack")
		stdout, stderr, err := packCLI("-m", model, "-o", packDir)
		if err != nil {
			t.Fatalf("%s: pack: %v\n%s", arch, err, stderr)
		}
		if want := fmt.Sprintf("%d blobs (%d layers x %d experts, %d bytes each)", count, info.Layers, info.Experts, blob); !strings.Contains(stdout, want) {
			t.Errorf("%s: pack says %q, want %q", arch, stdout, want)
		}
		l, err := experts.OpenPack(filepath.Join(packDir, experts.PackFile), f)
		if err != nil {
			t.Fatalf("%s: the pack does not open: %v", arch, err)
		}
		src, err := experts.GGUFLayout(f)
		if err != nil {
			t.Fatal(err)
		}
		if l.Shape.Count() != count || l.Shape.BlobBytes() != blob {
			t.Errorf("%s: pack of %d experts of %d bytes, want %d of %d", arch, l.Shape.Count(), l.Shape.BlobBytes(), count, blob)
		}
		for _, id := range []experts.ID{{Layer: 0, Expert: 0}, {Layer: info.Layers - 1, Expert: info.Experts - 1}} {
			g, u, d := l.Blob(id)
			wg, wu, wd := src.Blob(id)
			if !bytes.Equal(g, wg) || !bytes.Equal(u, wu) || !bytes.Equal(d, wd) {
				t.Errorf("%s: %v: packed bytes differ from the model's", arch, id)
			}
		}
		l.Close()
		src.Close()
		f.Close()

		// plan: the routed experts in the tiers, the shared ones with the weights.
		pj, code, errs := planCLI(t, "-m", model, "--backend", "cpu")
		if code != 0 {
			t.Fatalf("%s: plan: exit %d: %s", arch, code, errs)
		}
		if pj.Layers != info.Layers || pj.Experts != info.Experts || pj.ExpertBytes != blob || pj.Tiers["cpu"] != count || pj.NonExpertBytes < info.NonExpertBytes {
			t.Errorf("%s: plan of %d x %d experts of %d bytes, tiers %v, non-expert %d; want %d x %d of %d, all on the cpu, non-expert >= %d",
				arch, pj.Layers, pj.Experts, pj.ExpertBytes, pj.Tiers, pj.NonExpertBytes, info.Layers, info.Experts, blob, info.NonExpertBytes)
		}
	}
}
