package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
)

// activationsOf is activationBytesFor of the model at path for each batch.
func activationsOf(t *testing.T, path string, batches ...int) map[int]int64 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := model.ReadHparams(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, b := range batches {
		out[b] = activationBytesFor(f, h, b)
	}
	return out
}

// TestPlanSizesActivationsFromTheBatch: the VRAM kept for activations is what the prefill
// batch takes, not a fixed share; with --prefill auto a tight budget gets the largest batch
// whose activations fit (without the streaming ring below the batches that stream), and
// a budget too small for any says what to change.
func TestPlanSizesActivationsFromTheBatch(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := smallestVariant(t)
	act := activationsOf(t, path, 16, 128, 256, 512)
	if !(act[16] < act[128] && act[128] < act[256] && act[256] < act[512]) {
		t.Fatalf("activations do not grow with the batch: %v", act)
	}
	cfg := DefaultConfig()
	cfg.ResidentExperts, cfg.MaxContext, cfg.VRAMReserveMiB = true, 1024, 0
	roomy, _, err := PlanForMachine(context.Background(), path, cfg, Machine{GPUFreeBytes: 4 << 30, HostAvailBytes: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if roomy.Batch != defaultPrefill {
		t.Fatalf("a roomy GPU plans batches of %d, want %d", roomy.Batch, defaultPrefill)
	}
	ring := roomy.ActivationBytes - act[defaultPrefill]
	if ring <= 0 || ring%roomy.Shape.BlobBytes() != 0 {
		t.Fatalf("the streaming ring is %d bytes, want whole experts of %d", ring, roomy.Shape.BlobBytes())
	}
	fixed := roomy.NonExpertBytes + roomy.KVBytes // KV for the 1024 tokens of --max-context

	// Exactly what batches of 128 need: auto picks 128.
	mc := Machine{GPUFreeBytes: fixed + act[128] + ring, HostAvailBytes: 16 << 30}
	p, _, err := PlanForMachine(context.Background(), path, cfg, mc)
	if err != nil {
		t.Fatalf("a budget that holds batches of 128: %v", err)
	}
	if p.Batch != 128 || p.ActivationBytes != act[128]+ring || !strings.Contains(strings.Join(p.Notes, "\n"), "batches of 128 tokens") {
		t.Errorf("batch %d, activations %d (want 128 and %d), notes %q", p.Batch, p.ActivationBytes, act[128]+ring, p.Notes)
	}
	// The same budget refuses --prefill 512 and names the knobs.
	cfg512 := cfg
	cfg512.Prefill = 512
	_, _, err = PlanForMachine(context.Background(), path, cfg512, mc)
	if !errors.Is(err, experts.ErrBudgetTooSmall) {
		t.Fatalf("--prefill 512 in a budget for 128: %v", err)
	}
	for _, want := range []string{"for prefill batches of 512 tokens (--prefill)", "--max-context", "or --prefill", "--vram-budget-mib"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	// Batches too small to stream need no ring.
	mc.GPUFreeBytes = fixed + act[minPrefill]
	p, _, err = PlanForMachine(context.Background(), path, cfg, mc)
	if err != nil || p.Batch != minPrefill || p.ActivationBytes != act[minPrefill] {
		t.Errorf("a budget for the smallest batch without a ring: %v, batch %d, activations %d (want %d, %d)", err, p.Batch, p.ActivationBytes, minPrefill, act[minPrefill])
	}
	// Less than that is refused, for the smallest batch.
	mc.GPUFreeBytes--
	if _, _, err = PlanForMachine(context.Background(), path, cfg, mc); !errors.Is(err, experts.ErrBudgetTooSmall) || !strings.Contains(err.Error(), "batches of 16 tokens") {
		t.Errorf("a budget below the smallest batch: %v", err)
	}
}

// TestPlannedActivationsHoldOnTheGPU: on a real GPU, a --vram-budget-mib that holds what the
// plan counts (weights, the KV cache, the activations of the batch, two expert slots) runs a
// prompt of several batches and a decode without the backend asking for more. It skips
// without an NVIDIA driver.
func TestPlannedActivationsHoldOnTheGPU(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := smallestVariant(t)
	cfg := DefaultConfig()
	cfg.Backend, cfg.ResidentExperts, cfg.MaxContext, cfg.VRAMReserveMiB, cfg.Prefill = "cuda", true, 512, 0, 64
	p, _, err := PlanFor(context.Background(), path, cfg)
	if errors.Is(err, gpu.ErrNoGPU) || (err != nil && strings.Contains(err.Error(), "no NVIDIA GPU")) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	need := p.NonExpertBytes + p.KVBytes + p.ActivationBytes + 2*p.Shape.BlobBytes()
	cfg.VRAMBudgetMiB = int((need + 1<<20 - 1) >> 20)
	m, err := Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatalf("--vram-budget-mib %d (the plan's %d bytes): %v", cfg.VRAMBudgetMiB, need, err)
	}
	defer m.Close()
	prompt := make([]int, 3*cfg.Prefill+5)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % m.Info().Vocab
	}
	res, err := m.NewSession(SessionOptions{}).Generate(context.Background(), prompt, Sampling{MaxTokens: 16, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatalf("--vram-budget-mib %d: %v", cfg.VRAMBudgetMiB, err)
	}
	if len(res.Tokens) != 16 {
		t.Errorf("generated %d tokens, want 16", len(res.Tokens))
	}
}
