package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/fixtures"
)

func planCLI(t *testing.T, args ...string) (planJSON, int, string) {
	t.Helper()
	code, out, errs := runCLI(t, append([]string{"plan", "--json"}, args...)...)
	var p planJSON
	if code == 0 {
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("plan %v: stdout is not one JSON object: %v\n%s", args, err, out)
		}
	}
	return p, code, errs
}

func TestPlanCommand(t *testing.T) {
	model := fixtures.Path(t, "qwen3moe-tiny", "model-q4_k.gguf") // head size 64: the GPU kernels take it
	info, err := engine.Inspect(context.Background(), model)
	if err != nil {
		t.Fatal(err)
	}
	count := info.Layers * info.Experts
	kvPerToken := int64(2 * info.Layers * info.KVHeads * info.HeadDim * 2)

	// On the CPU every expert is read from the file.
	p, code, errs := planCLI(t, "-m", model, "--backend", "cpu")
	if code != 0 {
		t.Fatalf("cpu plan: exit %d: %s", code, errs)
	}
	if p.Slots != 0 || p.Tiers["cpu"] != count || len(p.Tiers) != 1 || p.Bytes["cpu"] != info.ExpertBytes {
		t.Errorf("cpu plan: %d slots, tiers %v, bytes %v; want %d cpu experts of %d bytes", p.Slots, p.Tiers, p.Bytes, count, info.ExpertBytes)
	}
	if len(p.Tier) != info.Layers || len(p.Tier[0]) != info.Experts || p.Tier[1][7] != "cpu" {
		t.Errorf("cpu plan: tier array %v", p.Tier)
	}

	// A 2000 MiB card capped at 518 MiB: the weights, 4096 tokens of KV (the model's
	// context, below the 8k the planner keeps) and the activations come first, the cache
	// gets what is left.
	p, code, errs = planCLI(t, "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", "518")
	if code != 0 {
		t.Fatalf("gpu plan: exit %d: %s", code, errs)
	}
	left := p.VRAMLimitBytes - p.NonExpertBytes - 4096*kvPerToken - p.ActivationBytes
	if p.VRAMLimitBytes != 518<<20 || p.Slots != int(left/p.ExpertBytes) || p.Slots <= 0 || p.Slots >= count {
		t.Fatalf("gpu plan: %d slots in %d bytes (%d left, %d per expert)", p.Slots, p.VRAMLimitBytes, left, p.ExpertBytes)
	}
	vram := 0
	for _, row := range p.Tier {
		for _, tier := range row {
			if tier == "vram" {
				vram++
			}
		}
	}
	if vram != p.Slots || p.Tiers["vram"] != p.Slots || p.Tiers["cold"] != count-p.Slots || p.VRAMUsedBytes > p.VRAMLimitBytes {
		t.Errorf("gpu plan: %d vram in the array, tiers %v, %d of %d bytes used", vram, p.Tiers, p.VRAMUsedBytes, p.VRAMLimitBytes)
	}
	if p.Context < 2048 || p.KVBytes != int64(p.Context)*kvPerToken {
		t.Errorf("gpu plan: context %d with %d KV bytes", p.Context, p.KVBytes)
	}

	// Tiered: what VRAM does not hold is pinned while the host budget lasts.
	p, code, errs = planCLI(t, "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", "518", "--tiered-experts", "--ram-avail-gib", "10")
	if code != 0 {
		t.Fatalf("tiered plan: exit %d: %s", code, errs)
	}
	if p.Tiers["pinned"] != count-p.Slots || p.Tiers["cold"] != 0 {
		t.Errorf("tiered plan: tiers %v", p.Tiers)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"budget too small", []string{"-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", "100"}, 1,
			[]string{"100 MiB for Strata", "needs 517.5 MiB", "0.6 MiB of non-expert weights", "raise --vram-budget-mib", "--backend cpu"}},
		{"slots without a GPU", []string{"-m", model, "--backend", "cpu", "--expert-cache", "3"}, 1, []string{"no usable GPU"}},
		{"slots that do not fit", []string{"-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", "518", "--expert-cache", "15"}, 1, []string{"at most"}},
		{"no model", []string{"--backend", "cpu"}, 2, []string{"-m MODEL is required"}},
		{"missing model", []string{"-m", model + ".absent"}, 1, []string{"absent"}},
		{"negative machine", []string{"-m", model, "--gpu-free-mib", "-1"}, 2, []string{"cannot be negative"}},
	} {
		_, code, errs := planCLI(t, tc.args...)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d (%s)", tc.name, code, tc.code, errs)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr %q does not say %q", tc.name, errs, w)
			}
		}
	}

	// The GPU attention kernels do not take the q8_0 model's head size of 16: a CPU plan
	// that says why.
	p, code, errs = planCLI(t, "-m", fixtures.Path(t, "qwen3moe-tiny", "model-q8_0.gguf"), "--gpu-free-mib", "2000")
	if code != 0 || p.Slots != 0 || !strings.Contains(strings.Join(p.Notes, "\n"), "head size of 16") {
		t.Errorf("head size 16: exit %d (%s), %d slots, notes %q", code, errs, p.Slots, p.Notes)
	}

	// Human output is the summary table.
	code, out, errs := runCLI(t, "plan", "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", "518")
	if code != 0 {
		t.Fatalf("human plan: exit %d: %s", code, errs)
	}
	for _, w := range []string{"qwen3moe", "VRAM expert cache:", "vram ", "cold ", "KV cache:", "left:"} {
		if !strings.Contains(out, w) {
			t.Errorf("human plan lacks %q:\n%s", w, out)
		}
	}
}
