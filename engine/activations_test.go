package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
	"strata/engine/synth"
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
	fixed := roomy.VRAMWeightBytes() + roomy.KVBytes // KV for the 1024 tokens of --max-context

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
// prompt of several batches, a decode and an eval of every position without the backend
// asking for more. It skips without an NVIDIA driver.
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
	need := p.VRAMWeightBytes() + p.KVBytes + p.ActivationBytes + 2*p.Shape.BlobBytes()
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
	s := m.NewSession(SessionOptions{})
	res, err := s.Generate(context.Background(), prompt, Sampling{MaxTokens: 16, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatalf("--vram-budget-mib %d: %v", cfg.VRAMBudgetMiB, err)
	}
	if len(res.Tokens) != 16 {
		t.Errorf("generated %d tokens, want 16", len(res.Tokens))
	}
	// Every position's logits (strata eval) within the same plan.
	rows := 0
	if err := s.Eval(context.Background(), prompt, func(int, []float32) { rows++ }); err != nil {
		t.Fatalf("eval under --vram-budget-mib %d: %v", cfg.VRAMBudgetMiB, err)
	}
	if rows != len(prompt) {
		t.Errorf("eval gave %d rows of logits, want %d", rows, len(prompt))
	}
}

// countingStandIn is the CPU backend standing in for the GPU one, counting the floats of
// the activation buffers it hands out (the gpu backend's NewBuf, which --vram-budget-mib
// caps).
type countingStandIn struct {
	*cpu.Backend
	floats int
}

func (c *countingStandIn) NewBuf(n int) compute.Buf {
	c.floats += n
	return c.Backend.NewBuf(n)
}

// TestEvalStaysInThePlannedActivations: the plan counts one row of logits in a session's
// activations (sessionActivationBytes, from ScratchFloats of the prefill batch), and strata
// eval asks for every row's. An Eval of several prefill batches and a remainder, after a
// Generate, allocates exactly that scratch and no rows x vocab logits buffer (which on the
// H200 under --vram-budget-mib 8192 failed: "gpu: activations: 66 MiB more would exceed the
// VRAM budget"); its logits match a Generate's at the last position.
func TestEvalStaysInThePlannedActivations(t *testing.T) {
	spec, err := synth.PresetFor("gpt-oss", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant, spec.Pool = quant.Q8_0, 64
	path := filepath.Join(t.TempDir(), "gptoss.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := describe(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	b := &countingStandIn{Backend: cpu.New(cpu.Options{Threads: 2})}
	net, err := model.Load(f, b, nil)
	if err != nil {
		b.Close()
		f.Close()
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Threads, cfg.MaxContext, cfg.Prefill, cfg.LearnProfile = 2, 64, 8, false
	m, err := openPlaced(context.Background(), f, cfg, info, &placement{backend: b, net: net})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	defer m.Close()
	tokens := make([]int, 2*cfg.Prefill+3)
	for i := range tokens {
		tokens[i] = (i*37 + 11) % info.Vocab
	}
	b.floats = 0
	s := m.NewSession(SessionOptions{})
	res, err := s.Generate(context.Background(), tokens, Sampling{MaxTokens: 1, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	planned := m.net.H.ScratchFloats(cfg.Prefill)
	if b.floats != planned {
		t.Fatalf("a Generate allocated %d floats of activations, the plan counts %d", b.floats, planned)
	}
	var last []float32
	if err := s.Eval(context.Background(), tokens, func(pos int, l []float32) {
		if pos == len(tokens)-1 {
			last = append([]float32(nil), l...)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if b.floats != planned {
		t.Errorf("an Eval of %d tokens in batches of %d allocated %d floats of activations (%d rows of logits more), the plan counts %d (one row of logits)",
			len(tokens), cfg.Prefill, b.floats, (b.floats-planned)/info.Vocab, planned)
	}
	if 4*int64(planned) > sessionActivationBytes(m.net.H, cfg.Prefill) {
		t.Errorf("the session's activations (%d bytes) do not hold its scratch of %d floats", sessionActivationBytes(m.net.H, cfg.Prefill), planned)
	}
	// The greedy token after the prompt is the largest of Eval's last logits.
	best := 0
	for i, v := range last {
		if v > last[best] {
			best = i
		}
	}
	if len(last) != info.Vocab || len(res.Tokens) != 1 || res.Tokens[0] != best {
		t.Errorf("Eval's last logits (%d) pick %d, Generate picked %v", len(last), best, res.Tokens)
	}
}
