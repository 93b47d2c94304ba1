package gui

import (
	"context"
	"testing"
	"time"

	"strata/engine"
)

// BenchmarkDecodeTierMap measures decode speed on the demo model with the tier map closed
// and open (a refresher taking a snapshot and drawing the grid every tiersEvery, as the tab
// does). Compare the tokens/s metrics of the two sub-benchmarks.
func BenchmarkDecodeTierMap(b *testing.B) {
	path, err := makeDemo(context.Background(), b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.Backend = "cpu"
	m, err := engineAPI{}.Open(context.Background(), path, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	sp := engine.Sampling{Temperature: 0, MaxTokens: 64}
	msgs := []engine.Message{{Role: engine.RoleUser, Content: "Tell me about memory tiers."}}
	for _, open := range []bool{false, true} {
		name := "closed"
		if open {
			name = "open"
		}
		b.Run(name, func(b *testing.B) {
			stop := make(chan struct{})
			if open {
				go func() {
					tick := time.NewTicker(tiersEvery)
					defer tick.Stop()
					var prev [][]uint64
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							s := m.Tiers()
							drawGrid(740, 590, s, prev)
							prev = s.Hits
						}
					}
				}()
			}
			var tokens int
			var decode time.Duration
			for i := 0; i < b.N; i++ {
				res, err := m.NewSession(engine.SessionOptions{}).Chat(context.Background(), msgs, sp, nil)
				if err != nil {
					b.Fatal(err)
				}
				tokens += res.Timings.GeneratedTokens - 1
				decode += res.Timings.Decode
			}
			close(stop)
			if decode > 0 {
				b.ReportMetric(float64(tokens)/decode.Seconds(), "tokens/s")
			}
		})
	}
}

// BenchmarkTierRefresh is the cost of one tier map refresh (snapshot and grid drawing) for
// a Qwen3-30B-A3B-sized map, 48 layers x 128 experts; the tab pays it 1/tiersEvery times
// a second.
func BenchmarkTierRefresh(b *testing.B) {
	const layers, experts = 48, 128
	s := engine.TierSnapshot{Layers: layers, Experts: experts, Tier: make([][]engine.Tier, layers), Hits: make([][]uint64, layers)}
	for l := range layers {
		s.Tier[l] = make([]engine.Tier, experts)
		s.Hits[l] = make([]uint64, experts)
		for e := range experts {
			s.Tier[l][e] = engine.Tier(e % 4)
			s.Hits[l][e] = uint64(l * e)
		}
	}
	for b.Loop() {
		drawGrid(740, 590, s, s.Hits)
	}
}
