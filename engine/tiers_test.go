package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"strata/engine"
	"strata/engine/synth"
)

// TestTiersSpeedFollowsDecode: the tier map's decode rate is live while an answer is
// written, and is the answer's own rate once it is done.
func TestTiersSpeedFollowsDecode(t *testing.T) {
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 2, 64
	m, err := engine.Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var during []float64
	res, err := m.NewSession(engine.SessionOptions{}).Generate(context.Background(), []int{1, 2, 3}, engine.Sampling{MaxTokens: 6, IgnoreEOS: true},
		func(engine.Token) { during = append(during, m.Tiers().TokensPerSec) })
	if err != nil {
		t.Fatal(err)
	}
	if len(during) < 3 {
		t.Fatalf("%d tokens streamed, want at least 3", len(during))
	}
	// From the second token on there is a rate to show.
	for i, tps := range during[1:] {
		if tps <= 0 {
			t.Errorf("token %d: the tier map's rate is %.1f while decoding", i+2, tps)
		}
	}
	if got, want := m.Tiers().TokensPerSec, res.Timings.DecodeTokensPerSec(); got != want || want <= 0 {
		t.Errorf("after the answer the tier map's rate is %.2f, the answer's %.2f", got, want)
	}
}
