package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/quant"
	"strata/engine/synth"
)

// TestChatContextFull: a terminal chat that outgrows its context neither crashes nor
// stalls: with --context-full stop it says so and goes on reading (the user can /reset);
// with drop-oldest it says how many old messages the model no longer sees and answers.
func TestChatContextFull(t *testing.T) {
	spec, err := synth.Preset("tiny") // a byte-level vocabulary: any text is tokens
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant = quant.Q8_0
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.Write(context.Background(), model, spec, nil); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("tell me more about this ", 3)
	input := strings.Repeat(long+"\n", 8) + "/reset\nhello\n"
	for _, tc := range []struct {
		policy string
		want   []string
	}{
		{"stop", []string{"context full", "/reset", "(conversation cleared)"}},
		{"drop-oldest", []string{"were left out", "the system prompt was kept"}},
	} {
		var out, errb bytes.Buffer
		code := Main([]string{"chat", "-m", model, "--backend", "cpu", "--max-context", "128", "-n", "8", "--temp", "0",
			"--system", "be brief", "--context-full", tc.policy}, IO{In: strings.NewReader(input), Out: &out, Err: &errb})
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.policy, code, errb.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.policy, w, errb.String())
			}
		}
		// Every message got its prompt back: nothing stalled or ended the chat early.
		if n := strings.Count(out.String(), "\n> "); n != 11 {
			t.Errorf("%s: %d prompts shown, want 11 (10 lines and the end)", tc.policy, n)
		}
	}
	if code, _, errs := runCLI(t, "chat", "-m", model, "--context-full", "truncate"); code != 2 || !strings.Contains(errs, "stop, drop-oldest") {
		t.Errorf("bad policy: exit %d, %s", code, errs)
	}
}
