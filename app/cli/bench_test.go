package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if rep.PromptTokens != 8 || rep.DecodeTokens != 4 {
		t.Errorf("%d prompt and %d decoded tokens per run, want 8 and 4", rep.PromptTokens, rep.DecodeTokens)
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
