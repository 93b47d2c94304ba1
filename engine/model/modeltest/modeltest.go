// Package modeltest holds what the forward-pass tests of every backend share: loading a
// model onto a backend, greedy generation that records logits, and reading reference arrays.
package modeltest

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"strata/engine/compute"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/sample"
)

// Hparams reads the hyperparameters of the GGUF file at path.
func Hparams(t testing.TB, path string) model.Hparams {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := model.ReadHparams(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h
}

// Load opens a GGUF file and places its weights on b; both are released by t's cleanup
// (the backend's own Close stays with its creator).
func Load(t testing.TB, path string, b compute.Backend) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	net, err := model.Load(f, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return net
}

// Greedy evaluates the prompt in one batch (all positions' logits), then decodes n tokens
// greedily one at a time, returning the prompt logits, each decode step's logits and the
// tokens. obs (may be nil) sees the prompt pass's routes.
func Greedy(t testing.TB, net *model.Model, prompt []int, n int, kvType string, obs model.Observer) (promptLogits, genLogits []float32, gen []int) {
	t.Helper()
	V := net.H.Vocab
	st, err := net.NewState(len(prompt)+n+1, kvType)
	if err != nil {
		t.Fatal(err)
	}
	promptLogits = make([]float32, len(prompt)*V)
	if err := net.Forward(st, prompt, true, promptLogits, obs); err != nil {
		t.Fatal(err)
	}
	logits := append([]float32(nil), promptLogits[(len(prompt)-1)*V:]...)
	for range n {
		genLogits = append(genLogits, logits...)
		id := sample.Argmax(logits)
		gen = append(gen, id)
		if err := net.Forward(st, []int{id}, false, logits, nil); err != nil {
			t.Fatal(err)
		}
	}
	return promptLogits, genLogits, gen
}

// ReadF32 reads a little-endian float32 array file.
func ReadF32(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// ReadI32 reads a little-endian int32 array file.
func ReadI32(t testing.TB, path string) []int32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// MaxAbsDiff is max |a[i] - b[i]|.
func MaxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// Compare returns max |got - want| and RMS(got - want) / std(want).
func Compare(got, want []float32) (maxAbs, rel float64) {
	var mean, se, ss float64
	for _, w := range want {
		mean += float64(w)
	}
	mean /= float64(len(want))
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		maxAbs = math.Max(maxAbs, math.Abs(d))
		se += d * d
		ss += (float64(want[i]) - mean) * (float64(want[i]) - mean)
	}
	return maxAbs, math.Sqrt(se / ss)
}

// Forced is Greedy with the continuation given: it evaluates the prompt in one batch, then
// feeds tokens one at a time, returning the prompt logits and the logits each token was
// chosen from. Two backends fed the same tokens can be compared step by step even where
// their greedy choices would part on a near tie.
func Forced(t testing.TB, net *model.Model, prompt, tokens []int, kvType string) (promptLogits, stepLogits []float32) {
	t.Helper()
	return forced(t, net, prompt, tokens, kvType, nil)
}

// ForcedRoutes is Forced recording every expert choice: it returns the prompt's logits then
// those each token was chosen from, in one slice, and the ids of every layer's routes of
// every pass, in the order the layers report them, so two runs can tell whether they routed
// alike.
func ForcedRoutes(t testing.TB, net *model.Model, prompt, tokens []int, kvType string) (logits []float32, routes []int) {
	t.Helper()
	log := &routeLog{}
	pl, sl := forced(t, net, prompt, tokens, kvType, log)
	return append(pl, sl...), log.ids
}

// routeLog keeps every expert choice of a run.
type routeLog struct{ ids []int }

func (r *routeLog) Routes(_ int, rt compute.Routes) {
	for _, id := range rt.IDs[:rt.N*rt.K] {
		r.ids = append(r.ids, int(id))
	}
}

func forced(t testing.TB, net *model.Model, prompt, tokens []int, kvType string, obs model.Observer) (promptLogits, stepLogits []float32) {
	t.Helper()
	V := net.H.Vocab
	st, err := net.NewState(len(prompt)+len(tokens)+1, kvType)
	if err != nil {
		t.Fatal(err)
	}
	promptLogits = make([]float32, len(prompt)*V)
	if err := net.Forward(st, prompt, true, promptLogits, obs); err != nil {
		t.Fatal(err)
	}
	logits := append([]float32(nil), promptLogits[(len(prompt)-1)*V:]...)
	for _, id := range tokens {
		stepLogits = append(stepLogits, logits...)
		if err := net.Forward(st, []int{id}, false, logits, obs); err != nil {
			t.Fatal(err)
		}
	}
	return promptLogits, stepLogits
}

// Margin is the gap between the largest and second largest logit of a row.
func Margin(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		switch x := float64(v); {
		case x > a:
			a, b = x, a
		case x > b:
			b = x
		}
	}
	return a - b
}
