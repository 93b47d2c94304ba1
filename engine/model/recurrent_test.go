package model

import (
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
)

// countingBackend counts the buffers a recurrent state allocates.
type countingBackend struct {
	compute.Backend
	bufs int
}

func (c *countingBackend) NewBuf(n int) compute.Buf {
	c.bufs++
	return c.Backend.NewBuf(n)
}

// TestRecurrentCheckpointsReuseCopies: a state rewound to the start for every new prompt (as
// each chat, regenerate or profile prompt does) and checkpointed again allocates no more
// than maxCheckpoints copies over its life, and a rewind still restores the state it kept.
// (It allocated a copy per checkpoint, so a profile's 43 prompts ran a qwen3next plan out
// of VRAM at the fifth.)
func TestRecurrentCheckpointsReuseCopies(t *testing.T) {
	c := cpu.New(cpu.Options{Threads: 1})
	defer c.Close()
	b := &countingBackend{Backend: c}
	const layers = 3
	r := recurrent{b: b}
	for range layers {
		r.layers = append(r.layers, layerState{conv: b.NewBuf(4), ssm: b.NewBuf(8)})
	}
	fill := func(v float32) {
		for _, l := range r.layers {
			row := make([]float32, l.ssm.Len())
			for i := range row {
				row[i] = v
			}
			b.Write(l.ssm, row)
		}
	}
	for prompt := range 20 {
		if got := r.rewind(0); got != 0 {
			t.Fatalf("prompt %d: rewind(0) went to %d", prompt, got)
		}
		for i, pos := range []int{10, 20, 30, 40, 50, 60} { // more than maxCheckpoints
			fill(float32(prompt*100 + i))
			r.checkpoint(pos + prompt)
		}
		fill(-1)
		if got := r.rewind(45 + prompt); got != 40+prompt {
			t.Fatalf("prompt %d: rewind to %d went to %d, want the checkpoint at %d", prompt, 45+prompt, got, 40+prompt)
		}
		row := make([]float32, 8)
		b.Read(r.layers[layers-1].ssm, row)
		if want := float32(prompt*100 + 3); row[0] != want {
			t.Fatalf("prompt %d: the restored state holds %v, want %v", prompt, row[0], want)
		}
	}
	if max := 2 * layers * (1 + maxCheckpoints); b.bufs > max {
		t.Errorf("%d buffers allocated over 20 prompts, want at most %d (the state and %d checkpoints)", b.bufs, max, maxCheckpoints)
	}
}
