package model_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/model"
	"strata/engine/model/modeltest"
	"strata/engine/quant"
	"strata/engine/synth"
)

// longContextModel is the smallest synthetic qwen3moe that still exercises a long int8 cache:
// one layer, two query heads on one KV head of 64 dims (two int8 blocks a row), four small
// experts, a context of positions.
func longContextModel(t testing.TB, positions int) *model.Model {
	t.Helper()
	s, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Quant = quant.Q8_0
	s.Layers, s.Experts, s.ExpertsUsed = 1, 4, 2
	s.Hidden, s.ExpertFFN, s.FFN = 64, 64, 128
	s.Heads, s.KVHeads, s.HeadDim = 2, 1, 64
	s.Vocab, s.Context = 259, positions
	path := filepath.Join(t.TempDir(), "long.gguf")
	if err := synth.Write(context.Background(), path, s, nil); err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { b.Close() })
	return modeltest.Load(t, path, b)
}

// lastLogits reads tokens into a fresh cache of kvType in chunks of 512 (as the engine
// prefills) and returns the logits of the last 64 positions.
func lastLogits(t testing.TB, net *model.Model, tokens []int, kvType string) []float32 {
	t.Helper()
	const last, chunk = 64, 512
	st, err := net.NewState(len(tokens), kvType)
	if err != nil {
		t.Fatal(err)
	}
	head := len(tokens) - last
	scratch := make([]float32, net.H.Vocab)
	for i := 0; i < head; i += chunk {
		if err := net.Forward(st, tokens[i:min(i+chunk, head)], false, scratch, nil); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]float32, last*net.H.Vocab)
	if err := net.Forward(st, tokens[head:], true, out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// compareLongContext holds the int8 cache's logits at the last 64 of positions tokens to the
// f16 cache's: RMS(Δ)/std within 0.05 (the bound for long contexts).
func compareLongContext(t testing.TB, positions int) {
	net := longContextModel(t, positions)
	rng := rand.New(rand.NewPCG(uint64(positions), 29))
	tokens := make([]int, positions)
	for i := range tokens {
		tokens[i] = rng.IntN(net.H.Vocab)
	}
	want := lastLogits(t, net, tokens, "f16")
	got := lastLogits(t, net, tokens, "int8")
	maxAbs, rel := modeltest.Compare(got, want)
	t.Logf("%d positions: int8 vs f16 cache, last 64 rows: RMS/std %.4f, max |Δ| %.3g", positions, rel, maxAbs)
	if math.IsNaN(rel) || rel > 0.05 {
		t.Errorf("%d positions: int8 cache's logits at the last 64 positions: RMS(Δ)/std %.4f (limit 0.05)", positions, rel)
	}
}

// TestLongContextInt8MatchesF16 runs a synthetic model over 8,192 positions with each cache.
// The 32,768-position run takes about 40 s on two cores: BenchmarkLongContextInt8
// (go test -run '^$' -bench LongContextInt8 -benchtime 1x ./engine/model/) holds it to the
// same bound.
func TestLongContextInt8MatchesF16(t *testing.T) { compareLongContext(t, 8192) }

// BenchmarkLongContextInt8 is the 32k-position comparison of TestLongContextInt8MatchesF16
// (too slow for every CI run); it fails on the same bound.
func BenchmarkLongContextInt8(b *testing.B) {
	for b.Loop() {
		compareLongContext(b, 32768)
	}
}
