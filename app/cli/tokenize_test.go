package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"strata/engine/fixtures"
)

func runTokenizeCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, IO{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestTokenizeCommand(t *testing.T) {
	qwen := fixtures.Path(t, "tokenizers", "qwen3", "tokenizer.json.gz")
	// The dummy vocabulary of a fixture model: <t0> ... and the end token, as reference.json
	// describes it.
	ref := fixtures.LoadReference(t, "qwen3moe-tiny")
	v := ref.All()[0]
	gguf, m := ref.Path(v), ref.Model(t, v)
	vocab, last := m.DummyVocab(t)
	lastJSON := fmt.Sprintf(`{"ids":[%d]}`, vocab-1) + "\n"
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string // exact stdout when code is 0, else a piece of stderr
	}{
		{"text", "", []string{"tokenize", "--tokenizer", qwen, "Hello!"}, 0, "9707,0\n"},
		{"json", "", []string{"tokenize", "--tokenizer", qwen, "--json", "1234"}, 0, `{"ids":[16,17,18,19]}` + "\n"},
		{"special off", "", []string{"tokenize", "--tokenizer", qwen, "--json", "<|im_end|>"}, 0, `{"ids":[27,91,318,6213,91,29]}` + "\n"},
		{"special on", "", []string{"tokenize", "--tokenizer", qwen, "--special", "--json", "<|im_end|>"}, 0, `{"ids":[151645]}` + "\n"},
		{"jsonl", "\"Hello!\"\n\"\"\n\"<|im_end|>\"\n", []string{"tokenize", "--tokenizer", qwen, "--special", "--jsonl"}, 0,
			`{"ids":[9707,0]}` + "\n" + `{"ids":[]}` + "\n" + `{"ids":[151645]}` + "\n"},
		{"decode", "", []string{"tokenize", "--tokenizer", qwen, "--decode", "9707,0,151645"}, 0, "Hello!<|im_end|>\n"},
		{"decode json", "", []string{"tokenize", "--tokenizer", qwen, "--json", "--decode", "9707,151645"}, 0, `{"text":"Hello<|im_end|>"}` + "\n"},
		{"gguf", "", []string{"tokenize", "-m", gguf, "--special", "--json", last}, 0, lastJSON},
		{"gguf decode", "", []string{"tokenize", "-m", gguf, "--decode", fmt.Sprintf("0,%d", vocab-1)}, 0, "<t0>" + last + "\n"},
		{"no source", "", []string{"tokenize", "hi"}, 2, "exactly one of -m MODEL or --tokenizer"},
		{"two sources", "", []string{"tokenize", "-m", gguf, "--tokenizer", qwen, "hi"}, 2, "exactly one of -m MODEL"},
		{"no input", "", []string{"tokenize", "--tokenizer", qwen}, 2, "exactly one of TEXT, --jsonl or --decode"},
		{"two inputs", "", []string{"tokenize", "--tokenizer", qwen, "--decode", "1", "hi"}, 2, "exactly one of TEXT"},
		{"unquoted", "", []string{"tokenize", "--tokenizer", qwen, "hi", "there"}, 2, "one argument"},
		{"bad id", "", []string{"tokenize", "--tokenizer", qwen, "--decode", "1,x"}, 2, `"x" is not an integer`},
		{"id range", "", []string{"tokenize", "-m", gguf, "--decode", fmt.Sprint(vocab)}, 1, "outside the vocabulary"},
		{"bad line", "\"ok\"\nnot json\n", []string{"tokenize", "--tokenizer", qwen, "--jsonl"}, 1, "stdin line 2"},
		{"missing file", "", []string{"tokenize", "--tokenizer", qwen + ".nope", "hi"}, 1, "no such file"},
	} {
		code, out, errs := runTokenizeCLI(t, tc.stdin, tc.args...)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d (stderr %q)", tc.name, code, tc.code, errs)
			continue
		}
		if tc.code == 0 && out != tc.out {
			t.Errorf("%s: stdout %q, want %q", tc.name, out, tc.out)
		}
		if tc.code != 0 && !strings.Contains(errs, tc.out) {
			t.Errorf("%s: stderr %q does not say %q", tc.name, errs, tc.out)
		}
	}
}
