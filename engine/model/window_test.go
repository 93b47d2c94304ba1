package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/fixtures"
	"strata/engine/gguf"
)

// TestRingLayersMatchFullCache: past the point where sliding-window layers' rings wrap (a
// prompt fed as a short call, then one longer than a ring's batch, which runs as several
// passes, the first a full batch with a window behind it), the logits of every
// position and of decode steps equal those of a cache that keeps every position, on the
// float path; a rewind the ring still holds continues identically, a deeper one starts over.
func TestRingLayersMatchFullCache(t *testing.T) {
	// The all-F32 gpt-oss variant, whichever name reference.json gives it.
	ref := fixtures.LoadReference(t, "gptoss-tiny")
	path := ""
	for _, v := range ref.All() {
		if v.AllF32() {
			path = ref.Path(v)
		}
	}
	if path == "" {
		t.Skipf("fixtures: gptoss-tiny has no all-F32 variant (%v), skipping", ref.Names())
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := cpu.New(cpu.Options{Threads: 2, FloatPath: true})
	defer b.Close()
	m, err := Load(f, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, keep := m.H.RingLayers()
	if layers == 0 {
		t.Fatal("gptoss-tiny has no sliding-window layers")
	}
	first := 2 * m.H.SlidingWindow
	n := first + keep + ringBatch/2 // wraps every ring; the second call takes two passes
	ctx := n + 8
	rng := rand.New(rand.NewPCG(31, 32))
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = rng.IntN(m.H.Vocab)
	}
	V := m.H.Vocab
	run := func(rings bool) (*State, []float32) {
		s, err := m.newState(ctx, "f32", rings)
		if err != nil {
			t.Fatal(err)
		}
		if (s.batch > 0) != rings {
			t.Fatalf("rings %v: state batch %d", rings, s.batch)
		}
		out := make([]float32, (n+2)*V)
		// A short pass first, so a later full-size pass starts with a window behind it.
		if err := m.Forward(s, tokens[:first], true, out[:first*V], nil); err != nil {
			t.Fatal(err)
		}
		if err := m.Forward(s, tokens[first:], true, out[first*V:n*V], nil); err != nil {
			t.Fatal(err)
		}
		for i, id := range []int{3, 7} { // two decode steps
			if err := m.Forward(s, []int{id}, false, out[(n+i)*V:(n+i+1)*V], nil); err != nil {
				t.Fatal(err)
			}
		}
		return s, out
	}
	ring, got := run(true)
	_, want := run(false)
	worst := 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	t.Logf("ring layers keep %d positions; %d positions + 2 decode steps within %.2g of a full cache", keep, n, worst)
	if worst > 1e-4 {
		t.Fatalf("ring cache differs from the full one by %.3g", worst)
	}
	// Back a few tokens: the ring still holds their windows, so the same logits come again.
	back := n - 5
	if got := ring.Rewind(back); got != back {
		t.Fatalf("Rewind(%d) kept %d", back, got)
	}
	again := make([]float32, 5*V)
	if err := m.Forward(ring, tokens[back:], true, again, nil); err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if d := math.Abs(float64(again[i] - want[back*V+i])); d > 1e-4 {
			t.Fatalf("after a rewind to %d: logit %d off by %.3g", back, i, d)
		}
	}
	// Back past what a ring holds: start over.
	if got := ring.Rewind(10); got != 0 {
		t.Fatalf("Rewind(10) from %d kept %d, want 0", n, got)
	}
}
