package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/gguf"
	"strata/engine/quant"
)

func synthCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var errBuf bytes.Buffer
	err := runSynth(context.Background(), args, IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errBuf})
	return errBuf.String(), err
}

func TestSynthTiny(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, out := range []string{a, b} {
		stderr, err := synthCLI(t, "--arch", "qwen3moe", "--preset", "tiny", "--quant", "q8_0", "--seed", "7", "--zipf", "1", "-o", out)
		if err != nil {
			t.Fatalf("synth: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr, "100%") || !strings.Contains(stderr, "wrote") {
			t.Errorf("no progress on stderr: %q", stderr)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ab) == 0 || !bytes.Equal(ab, bb) {
		t.Error("the same seed gave different files")
	}
	f, err := gguf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Architecture() != "qwen3moe" || len(f.Tensors) != 2*12+3 {
		t.Fatalf("arch %q, %d tensors", f.Architecture(), len(f.Tensors))
	}
	if n, err := f.ArchUint("expert_count"); err != nil || n != 8 {
		t.Errorf("expert_count %d, %v", n, err)
	}
	for _, name := range []string{"blk.1.ffn_down_exps.weight", "token_embd.weight", "output.weight"} {
		if ti, ok := f.Tensor(name); !ok || ti.Type != quant.Q8_0 {
			t.Errorf("%s: %+v, %v", name, ti, ok)
		}
	}
	if ti, ok := f.Tensor("blk.0.ffn_gate_inp.weight"); !ok || ti.Type != quant.F32 {
		t.Errorf("router: %+v", ti)
	}
}

func TestSynthShape(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.gguf")
	if stderr, err := synthCLI(t, "--shape", "layers=1,experts=4,experts_used=1,hidden=64,expert_ffn=32,head_dim=16,vocab=300", "--quant", "f16", "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, ok := f.Tensor("blk.0.ffn_up_exps.weight")
	if !ok || ti.Type != quant.F16 || len(ti.Ne) != 3 || ti.Ne[0] != 64 || ti.Ne[1] != 32 || ti.Ne[2] != 4 {
		t.Errorf("ffn_up_exps: %+v", ti)
	}
	if toks, err := f.GetStrings("tokenizer.ggml.tokens"); err != nil || len(toks) != 300 {
		t.Errorf("%d tokens, %v", len(toks), err)
	}
}

// TestSynthIQ3XXS: the published Qwen3-Next file's type, through the CLI: every matrix in
// IQ3_XXS and llama.cpp's file type for it.
func TestSynthIQ3XXS(t *testing.T) {
	out := filepath.Join(t.TempDir(), "n.gguf")
	if stderr, err := synthCLI(t, "--arch", "qwen3next", "--preset", "tiny", "--quant", "iq3_xxs", "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"blk.0.ffn_down_exps.weight", "blk.0.attn_qkv.weight", "output.weight"} {
		if ti, ok := f.Tensor(name); !ok || ti.Type != quant.IQ3_XXS {
			t.Errorf("%s: %+v", name, ti)
		}
	}
	if ft, err := f.GetUint("general.file_type"); err != nil || ft != 23 {
		t.Errorf("general.file_type %d (%v), want 23 (MOSTLY_IQ3_XXS)", ft, err)
	}
}

func TestSynthErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.gguf")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "tiny"}, "-o FILE is required"},
		{[]string{"-o", out}, "--preset"},
		{[]string{"--preset", "7b", "-o", out}, "unknown preset \"7b\""},
		{[]string{"--arch", "llama", "--preset", "tiny", "-o", out}, "unknown architecture \"llama\""},
		{[]string{"--preset", "tiny", "--quant", "q9_9", "-o", out}, "unknown type \"q9_9\""},
		{[]string{"--preset", "tiny", "--quant", "iq1_s", "-o", out}, "cannot quantise"},
		{[]string{"--preset", "tiny", "--shape", "wings=2", "-o", out}, "unknown key \"wings\""},
		{[]string{"--preset", "tiny", "--quant", "q4_k", "--shape", "hidden=100", "-o", out}, "not a multiple"},
		{[]string{"--preset", "tiny", "--zipf", "1", "--hot-quarter", "0.4", "-o", out}, "not both"},
		{[]string{"--preset", "tiny", "--hot-quarter", "1.2", "-o", out}, "between 0 and 1"},
		{[]string{"--preset", "tiny", "--shape", "experts=3,experts_used=1", "--hot-quarter", "0.4", "-o", out}, "4 experts or more"},
	}
	for _, c := range cases {
		_, err := synthCLI(t, c.args...)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want a usage error with %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a failed synth left a file")
	}
}

// TestSynthHotQuarter: --hot-quarter says the share it aims at and the Zipf exponent it
// balances the routers to; a larger share is a larger exponent, so a larger skew.
func TestSynthHotQuarter(t *testing.T) {
	exponent := func(share string) string {
		out := filepath.Join(t.TempDir(), "h.gguf")
		stderr, err := synthCLI(t, "--preset", "tiny", "--quant", "q8_0", "--hot-quarter", share, "-o", out)
		if err != nil {
			t.Fatalf("--hot-quarter %s: %v\n%s", share, err, stderr)
		}
		aim := fmt.Sprintf("--hot-quarter %s: aiming the hottest quarter of each layer's experts at %s0.0%% of the routes", share, share[2:])
		_, after, ok := strings.Cut(stderr, "Zipf exponent of ")
		if !ok || !strings.Contains(stderr, aim) {
			t.Fatalf("--hot-quarter %s: stderr %q does not give the share and the exponent", share, stderr)
		}
		e, _, _ := strings.Cut(after, ",")
		return e
	}
	balanced, skewed := exponent("0.4"), exponent("0.8")
	var b, s float64
	if _, err := fmt.Sscan(balanced, &b); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(skewed, &s); err != nil {
		t.Fatal(err)
	}
	if !(b > 0 && s > b) {
		t.Errorf("exponents %g for 0.4 and %g for 0.8: want 0 < the first < the second", b, s)
	}
}
