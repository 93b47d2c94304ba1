package experts

import "time"

// The PCIe share: with the pinned tier registered with the GPU, a pinned miss can be
// computed by the CPU from RAM or by the GPU reading the expert over PCIe. The two run at
// the same time, so a decode step is quickest when neither waits for the other, and where
// that is depends on the PC (cores and memory against the bus and the card) and on the
// model's types. With CacheConfig.PCIeAuto the cache finds it: it times windows of decode
// steps and moves the share the way the last move made them faster (hill climbing), turning
// back with a smaller step when a move made them slower.
const (
	tuneWindow   = 16    // decode steps a share is timed over
	tuneStart    = 0.2   // the share a tuned cache starts from
	tuneStep     = 0.1   // the first move
	tuneMinStep  = 0.025 // the smallest move
	tuneMaxShare = 0.9   // the CPU always keeps some misses: it waits for the GPU otherwise
)

// shareTuner is the tuned share and the timing of the window in progress.
type shareTuner struct {
	share, step, dir float64
	prev             time.Duration // the last window's mean step; 0 before the first
	sum              time.Duration
	n                int
	last             time.Time // when the decode step in progress began; zero after a batch
	skip             bool      // the step in progress did other work (a swap pass): not timed
}

func newShareTuner(start float64) shareTuner {
	return shareTuner{share: start, step: tuneStep, dir: 1}
}

// decodeStep notes that a decode step begins at now, which ends the one before. A step far
// longer than the last window's mean (a pause between replies) is not timed.
func (t *shareTuner) decodeStep(now time.Time) {
	if !t.last.IsZero() && !t.skip {
		d := now.Sub(t.last)
		if t.prev == 0 && d < 2*time.Second || t.prev > 0 && d < 4*t.prev {
			t.sum += d
			t.n++
		}
	}
	t.last, t.skip = now, false
	if t.n < tuneWindow {
		return
	}
	mean := t.sum / time.Duration(t.n)
	t.sum, t.n = 0, 0
	if t.prev > 0 && mean > t.prev {
		t.dir = -t.dir
		t.step = max(t.step/2, tuneMinStep)
	}
	t.prev = mean
	t.share = min(max(t.share+t.dir*t.step, 0), tuneMaxShare)
}

// batchStep notes a step of several tokens: the decode step before it is not timed.
func (t *shareTuner) batchStep() { t.last = time.Time{} }

// interrupt notes that the step in progress does work a decode step does not always do.
func (t *shareTuner) interrupt() { t.skip = true }
