package engine_test

import (
	"context"
	"testing"

	"strata/engine"
)

// TestStepTimingRecordsEachDecodedToken: with STRATA_STEP_TIMING=1 a generation reports one
// timing per forward pass of a generated token, and none without it.
func TestStepTimingRecordsEachDecodedToken(t *testing.T) {
	_, files, prompts := qwenVariants(t)
	path := variantFile(t, files, "f32")
	p := prompts["f32"][0].Tokens
	for _, on := range []bool{false, true} {
		if on {
			t.Setenv("STRATA_STEP_TIMING", "1")
		}
		cfg := engine.DefaultConfig()
		cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 2, 128
		m, err := engine.Open(context.Background(), path, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 5
		res, err := m.NewSession(engine.SessionOptions{}).Generate(context.Background(), p, engine.Sampling{MaxTokens: n, IgnoreEOS: true}, nil)
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !on && res.Steps != nil:
			t.Errorf("timing off: %d steps reported", len(res.Steps))
		case on && len(res.Steps) != n-1: // the last token is not fed back
			t.Errorf("timing on: %d steps for %d tokens, want %d", len(res.Steps), n, n-1)
		}
		for i, st := range res.Steps {
			if st.Forward <= 0 || st.Sample < 0 || st.Emit < 0 {
				t.Errorf("step %d: %+v", i, st)
			}
		}
	}
}
