package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/compute/gpu"
	"strata/engine/fixtures"
	"strata/engine/kv"
	"strata/engine/synth"
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

// synthPlanModel writes the synthetic tiny model (head size 64, which the GPU kernels take):
// planning is about shapes, so the GPU half of the plan test needs no reference numbers.
func synthPlanModel(t *testing.T) string {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func mibText(b int64) string {
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func TestPlanCommand(t *testing.T) {
	// Every fixture variant: the CPU plan reads every expert from the file; a head size the
	// GPU kernels do not take gives a CPU plan that says why.
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	for _, v := range ref.All() {
		info, err := engine.Inspect(context.Background(), ref.Path(v))
		if err != nil {
			t.Fatal(err)
		}
		count := info.Layers * info.Experts
		p, code, errs := planCLI(t, "-m", ref.Path(v), "--backend", "cpu")
		if code != 0 {
			t.Fatalf("%s: cpu plan: exit %d: %s", v.File, code, errs)
		}
		if p.Slots != 0 || p.Tiers["cpu"] != count || len(p.Tiers) != 1 || p.Bytes["cpu"] != info.ExpertBytes {
			t.Errorf("%s: cpu plan: %d slots, tiers %v, bytes %v; want %d cpu experts of %d bytes", v.File, p.Slots, p.Tiers, p.Bytes, count, info.ExpertBytes)
		}
		if len(p.Tier) != info.Layers || len(p.Tier[0]) != info.Experts || p.Tier[info.Layers-1][info.Experts-1] != "cpu" {
			t.Errorf("%s: cpu plan: tier array %v", v.File, p.Tier)
		}
		if hd := ref.Model(t, v).Config.HeadDim; !gpu.HeadDimSupported(hd) {
			p, code, errs = planCLI(t, "-m", ref.Path(v), "--gpu-free-mib", "2000")
			if code != 0 || p.Slots != 0 || !strings.Contains(strings.Join(p.Notes, "\n"), fmt.Sprintf("head size of %d", hd)) {
				t.Errorf("%s: head size %d: exit %d (%s), %d slots, notes %q", v.File, hd, code, errs, p.Slots, p.Notes)
			}
		}
	}

	model := synthPlanModel(t)
	info, err := engine.Inspect(context.Background(), model)
	if err != nil {
		t.Fatal(err)
	}
	count := info.Layers * info.Experts
	kvPerToken := int64(2 * info.Layers * info.KVHeads * info.HeadDim * 2)
	minCtx := int64(min(info.ContextLength, 8192)) // the model's context, or the 8k the planner keeps

	// A model that fits the card whole keeps its token embeddings in VRAM.
	p, code, errs := planCLI(t, "-m", model, "--gpu-free-mib", "4000")
	if code != 0 || p.HostWeightBytes != 0 {
		t.Fatalf("whole gpu plan: exit %d, %d non-expert bytes in pinned RAM, want 0: %s", code, p.HostWeightBytes, errs)
	}
	// What the GPU must hold before any expert when the experts are tiered, from a plan
	// with room to spare: the token embeddings go to pinned RAM (the synth file has an
	// output matrix), as in every plan below.
	p, code, errs = planCLI(t, "-m", model, "--gpu-free-mib", "4000", "--tiered-experts")
	if code != 0 {
		t.Fatalf("gpu plan: exit %d: %s", code, errs)
	}
	if p.HostWeightBytes <= 0 || p.HostWeightBytes >= p.NonExpertBytes {
		t.Fatalf("gpu plan: %d of %d non-expert bytes in pinned RAM, want the token embeddings", p.HostWeightBytes, p.NonExpertBytes)
	}
	weights := p.NonExpertBytes - p.HostWeightBytes // in VRAM
	need := weights + minCtx*kvPerToken + p.ActivationBytes
	budget := (need + 1<<20 - 1) >> 20 // MiB, the least that holds it

	// A 2000 MiB card capped at that budget: the cache gets what is left.
	p, code, errs = planCLI(t, "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(budget))
	if code != 0 {
		t.Fatalf("gpu plan: exit %d: %s", code, errs)
	}
	left := p.VRAMLimitBytes - weights - minCtx*kvPerToken - p.ActivationBytes
	fit := int(min(left/p.ExpertBytes, int64(count)))
	if p.VRAMLimitBytes != budget<<20 || p.Slots != fit || p.Slots >= count {
		t.Fatalf("gpu plan: %d slots in %d bytes (%d left, %d per expert), want %d of %d", p.Slots, p.VRAMLimitBytes, left, p.ExpertBytes, fit, count)
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
	p, code, errs = planCLI(t, "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(budget), "--tiered-experts", "--ram-avail-gib", "10")
	if code != 0 {
		t.Fatalf("tiered plan: exit %d: %s", code, errs)
	}
	if p.Tiers["pinned"] != count-p.Slots || p.Tiers["cold"] != 0 {
		t.Errorf("tiered plan: tiers %v", p.Tiers)
	}

	// Helper GPUs: the experts after the main GPU's slots, helper 1 first; the plan shows
	// their bytes.
	p, code, errs = planCLI(t, "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(budget),
		"--expert-cache-device1", "2", "--device1-free-mib", "1024", "--expert-cache-device2", "1")
	if code != 0 {
		t.Fatalf("helper plan: exit %d: %s", code, errs)
	}
	if !slices.Equal(p.HelperSlots, []int{2, 1}) || p.Tiers["helper"] != 3 || p.Bytes["helper"] != 3*p.ExpertBytes || p.Tiers["vram"] != fit {
		t.Errorf("helper plan: helper slots %v, tiers %v, bytes %v", p.HelperSlots, p.Tiers, p.Bytes)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "helper GPU 2's free VRAM is not known") {
		t.Errorf("helper plan: notes %q do not say helper 2 is unchecked", p.Notes)
	}

	small := (weights + minCtx*kvPerToken) >> 20 // MiB, less than the weights and KV
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"helper without room", []string{"-m", model, "--gpu-free-mib", "2000", "--expert-cache-device1", "2", "--device1-free-mib", "100"}, 1,
			[]string{"--expert-cache-device1 2", "helper GPU 1 has 100 MiB free", "lower --expert-cache-device1"}},
		{"helper room without the main GPU", []string{"-m", model, "--device1-free-mib", "100"}, 2, []string{"--gpu-free-mib too"}},
		// Less than the weights and the KV cache: no prefill batch helps (--prefill auto tries
		// down to 16 tokens, and says so).
		{"budget too small", []string{"-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(small)}, 1,
			[]string{fmt.Sprintf("%d MiB for Strata", small), mibText(weights) + " of non-expert weights", "for prefill batches of 16 tokens (--prefill)", "raise --vram-budget-mib", "--max-context or --prefill", "--backend cpu"}},
		{"budget too small for the batch asked for", []string{"-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(budget - 1), "--prefill", "512"}, 1,
			[]string{"needs " + mibText(need), "for prefill batches of 512 tokens (--prefill)", "--max-context or --prefill"}},
		{"slots without a GPU", []string{"-m", model, "--backend", "cpu", "--expert-cache", "3"}, 1, []string{"no usable GPU"}},
		{"slots that do not fit", []string{"-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(budget), "--expert-cache", fmt.Sprint(fit + 1)}, 1, []string{fmt.Sprintf("at most %d", fit)}},
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

	// Human output is the summary table.
	code, out, errs := runCLI(t, "plan", "-m", model, "--gpu-free-mib", "2000", "--vram-budget-mib", fmt.Sprint(budget))
	if code != 0 {
		t.Fatalf("human plan: exit %d: %s", code, errs)
	}
	for _, w := range []string{"qwen3moe", "VRAM expert cache:", "vram ", "cold ", "KV cache:", "left:"} {
		if !strings.Contains(out, w) {
			t.Errorf("human plan lacks %q:\n%s", w, out)
		}
	}
}

// TestPlanCountsInt8KV: --kv int8 plans a byte per value and a float32 scale per block of
// kv.BlockSize, against f16's two bytes, for every layer that grows with the context, with
// and without a GPU (the GPU kernels read the int8 cache in place, so it plans the same bytes).
func TestPlanCountsInt8KV(t *testing.T) {
	path := synthPlanModel(t)
	info, err := engine.Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if info.HeadDim%kv.Int8Block != 0 {
		t.Fatalf("the synthetic model's heads are %d wide, not whole int8 blocks", info.HeadDim)
	}
	full := int64(info.Layers - info.RingLayers - info.RecurrentLayers)
	for _, c := range []struct {
		kv   string
		want int64
	}{
		{"f16", 2 * full * int64(info.KVHeads) * int64(2*info.HeadDim)},
		{"int8", 2 * full * int64(info.KVHeads) * int64(info.HeadDim+4*info.HeadDim/kv.Int8Block)},
	} {
		for _, machine := range [][]string{{"--backend", "cpu", "--ram-avail-gib", "8"}, {"--gpu-free-mib", "4000"}} {
			p, code, errs := planCLI(t, append([]string{"-m", path, "--kv", c.kv}, machine...)...)
			if code != 0 {
				t.Fatalf("plan --kv %s %v: exit %d: %s", c.kv, machine, code, errs)
			}
			if p.KVBytesPerToken != c.want || p.KVBytes != p.KVBytesPerToken*int64(p.Context) {
				t.Errorf("plan --kv %s %v: %d KV bytes per token (want %d), %d for %d tokens", c.kv, machine, p.KVBytesPerToken, c.want, p.KVBytes, p.Context)
			}
		}
	}
}
