package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/engine"
)

// benchCLI runs `strata bench` with args and returns stdout.
func benchCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errBuf bytes.Buffer
	err := runBench(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &errBuf})
	return out.String(), err
}

func TestBenchRepeat(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if stderr, err := synthCLI(t, "--preset", "tiny", "--quant", "q8_0", "-o", model); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr)
	}
	common := []string{"-m", model, "--backend", "cpu", "--threads", "2", "--prompt", "8", "--decode", "4", "--json"}

	out, err := benchCLI(t, append(common, "--repeat", "3")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.PrefillRuns) != 3 || len(rep.DecodeRuns) != 3 {
		t.Fatalf("runs: prefill %v, decode %v; want 3 each", rep.PrefillRuns, rep.DecodeRuns)
	}
	for _, runs := range [][]float64{rep.PrefillRuns, rep.DecodeRuns} {
		if slices.Min(runs) <= 0 {
			t.Errorf("a run without a rate: %v", runs)
		}
	}
	if rep.PrefillTPS != median(rep.PrefillRuns) || rep.DecodeTPS != median(rep.DecodeRuns) {
		t.Errorf("reported %.3f / %.3f, medians of the runs %.3f / %.3f", rep.PrefillTPS, rep.DecodeTPS,
			median(rep.PrefillRuns), median(rep.DecodeRuns))
	}
	if len(rep.BandwidthRuns) != 3 || slices.Min(rep.BandwidthRuns) <= 0 || rep.MemBandwidthGBs != median(rep.BandwidthRuns) {
		t.Errorf("bandwidth %.2f GB/s, runs %v: want one positive sample per run and their median", rep.MemBandwidthGBs, rep.BandwidthRuns)
	}
	if want := fractionOfBound(rep.DecodeRuns, rep.BandwidthRuns, rep.BytesPerToken); rep.BytesPerToken <= 0 || rep.FractionOfBound != want {
		t.Errorf("fraction of bound %v, want %v (bytes per token %d)", rep.FractionOfBound, want, rep.BytesPerToken)
	}
	if rep.PromptTokens != 8 || rep.DecodeTokens != 4 {
		t.Errorf("%d prompt and %d decoded tokens per run, want 8 and 4", rep.PromptTokens, rep.DecodeTokens)
	}

	// Sampled decode (the GUI's preset) makes as many tokens; the batch is --prefill's.
	out, err = benchCLI(t, append(common, "--temp", "0.7", "--top-k", "20", "--top-p", "0.8", "--repeat-penalty", "1.05", "--prefill", "4")...)
	if err != nil {
		t.Fatal(err)
	}
	rep = benchReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.DecodeTokens != 4 || rep.PrefillBatch != 4 {
		t.Errorf("sampled with --prefill 4: %d decoded tokens in batches of %d, want 4 and 4 (%v)", rep.DecodeTokens, rep.PrefillBatch, err)
	}

	out, err = benchCLI(t, common...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "_runs") {
		t.Errorf("one run lists its runs: %s", out)
	}

	if _, err := benchCLI(t, append(common, "--repeat", "0")...); err == nil || !strings.Contains(err.Error(), "--repeat") {
		t.Errorf("--repeat 0: %v", err)
	}
}

func TestBandwidthPerRun(t *testing.T) {
	for _, c := range []struct {
		samples, want []float64
	}{
		{[]float64{20}, nil},
		{[]float64{10, 20}, []float64{20}},
		{[]float64{10, 20, 15, 12}, []float64{20, 20, 15}},
	} {
		if got := bandwidthPerRun(c.samples); !slices.Equal(got, c.want) {
			t.Errorf("bandwidthPerRun(%v) = %v, want %v", c.samples, got, c.want)
		}
	}
}

// Each run is set against its own bound: a run in a fast phase does not count against a
// bound measured in a slow one.
func TestFractionOfBound(t *testing.T) {
	const bytes = 2e9 // per token
	for _, c := range []struct {
		decode, bw []float64
		want       float64
	}{
		{nil, nil, 0},
		{[]float64{5}, []float64{20}, 0.5},                       // 5 tok/s x 2 GB of 20 GB/s
		{[]float64{5, 8, 6}, []float64{20, 20, 12}, 0.8},         // 0.5, 0.8, 1.0
		{[]float64{4, 9}, []float64{0, 20}, 0.9},                 // a sample without a rate is left out
		{[]float64{8, 8, 8, 8}, []float64{16, 32, 32, 16}, 0.75}, // 1, 0.5, 0.5, 1
	} {
		if got := fractionOfBound(c.decode, c.bw, bytes); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("fractionOfBound(%v, %v) = %v, want %v", c.decode, c.bw, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{4}, 4},
		{[]float64{9, 1, 5}, 5},
		{[]float64{9, 1, 5, 3}, 4},
	} {
		in := slices.Clone(c.xs)
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("median reordered its input: %v -> %v", in, c.xs)
		}
	}
}

// TestBenchSaysNotPinned: a pinned budget smaller than the resident arena keeps the arena
// in plain RAM, and bench --json says so with the budget.
func TestBenchSaysNotPinned(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if stderr, err := synthCLI(t, "--preset", "tiny", "--quant", "q8_0", "-o", model); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr)
	}
	args := []string{"-m", model, "--backend", "cpu", "--threads", "2", "--prompt", "4", "--decode", "2", "--json", "--resident-experts"}
	for _, budget := range []string{"0", "1"} {
		out, err := benchCLI(t, append(args, "--pinned-budget-mib", budget)...)
		if err != nil {
			t.Fatal(err)
		}
		var rep benchReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		c := rep.Cache
		if c == nil || c.ArenaGB*1e9 <= 1<<20 {
			t.Fatalf("budget %s: cache report %+v: want a resident arena over 1 MiB", budget, c)
		}
		notPinned := c.ArenaNotPinned != ""
		if notPinned != (budget == "1") || (notPinned && (!strings.Contains(c.ArenaNotPinned, "1 MiB (--pinned-budget-mib)") || c.ArenaLocked || c.PinnedBudgetMiB != 1)) {
			t.Errorf("budget %s MiB: arena_not_pinned %q, locked %v, pinned_budget_mib %v", budget, c.ArenaNotPinned, c.ArenaLocked, c.PinnedBudgetMiB)
		}
	}
}

// TestSummariseSteps: each part's median over the tokens, in microseconds.
func TestSummariseSteps(t *testing.T) {
	if summariseSteps(nil) != nil {
		t.Error("no steps gave a summary")
	}
	steps := []engine.StepTiming{
		{Forward: 5 * time.Millisecond, GPU: 4 * time.Millisecond, Sample: 100 * time.Microsecond, Segments: 1, Ops: 700},
		{Forward: 7 * time.Millisecond, GPU: 6 * time.Millisecond, Sample: 300 * time.Microsecond, Segments: 3, Ops: 700},
		{Forward: 6 * time.Millisecond, GPU: 5 * time.Millisecond, Sample: 200 * time.Microsecond, Segments: 1, Ops: 701},
	}
	s := summariseSteps(steps)
	if s.Tokens != 3 || s.Forward != 6000 || s.GPU != 5000 || s.Sample != 200 || s.Segments != 1 || s.Ops != 700 {
		t.Errorf("summary %+v", *s)
	}
}
