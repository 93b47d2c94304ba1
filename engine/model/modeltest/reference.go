package modeltest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Reference is the part of qwen3moe-tiny/reference.json the tests read.
type Reference struct {
	Variants map[string]struct {
		File    string `json:"file"`
		Prompts []struct {
			Name      string `json:"name"`
			Tokens    []int  `json:"tokens"`
			Generated []int  `json:"generated"`
			Files     map[string]struct {
				File  string `json:"file"`
				Shape []int  `json:"shape"`
			} `json:"files"`
			Margins struct {
				Prompt []float64 `json:"top1_minus_top2_logit_per_prompt_position"`
				Greedy []float64 `json:"top1_minus_top2_logit_per_greedy_step"`
			} `json:"margins"`
		} `json:"prompts"`
	} `json:"variants"`
}

// LoadReference reads dir/reference.json.
func LoadReference(t testing.TB, dir string) Reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reference.json: %v", err)
	}
	if len(r.Variants) == 0 {
		t.Fatal("reference.json lists no variants")
	}
	return r
}
