package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/fixtures"
)

func TestRunJSON(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if stderr, err := synthCLI(t, "--preset", "tiny", "--quant", "q8_0", "-o", model); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr)
	}
	code, out, errs := runCLI(t, "run", "-m", model, "--backend", "cpu", "-p", "Hello there", "-n", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Tokens  []int  `json:"tokens"`
		Text    string `json:"text"`
		Timings struct {
			PromptTokens    int `json:"prompt_tokens"`
			GeneratedTokens int `json:"generated_tokens"`
		} `json:"timings"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Tokens) != 3 || res.Timings.GeneratedTokens != 3 || res.Timings.PromptTokens < 1 {
		t.Errorf("tokens %v, timings %+v: want 3 generated after a non-empty prompt", res.Tokens, res.Timings)
	}
}

// A prompt none of whose bytes has a token (the fixture's dummy vocabulary holds only <tN>
// and <|endoftext|>) is refused by name, not run as an "empty prompt".
func TestRunPromptWithoutTokens(t *testing.T) {
	model := fixtures.LoadReference(t, "qwen3moe-tiny").Smallest()
	code, _, errs := runCLI(t, "run", "-m", model, "--backend", "cpu", "-p", "Hello", "-n", "2")
	if code != 1 || !strings.Contains(errs, `"Hello" gives no tokens`) || !strings.Contains(errs, "--tokens") {
		t.Fatalf("run -p Hello on a vocabulary without its bytes: exit %d, %s", code, errs)
	}
	if code, _, errs := runCLI(t, "run", "-m", model, "--backend", "cpu", "--tokens", "1,2,3", "-n", "2"); code != 0 {
		t.Errorf("the same model with --tokens: exit %d, %s", code, errs)
	}
}
