package engine

import (
	"fmt"

	"strata/platform"
)

// The GPU backend's pinned host memory: the step-input area it always allocates and the
// ring of staging buffers expert uploads pass through (gpu.Options). Under a pinned budget
// the ring shrinks to fewer, then smaller buffers, down to the least it works with.
const (
	stepInputPinBytes    = 64 << 10
	stagingWantBufs      = 6
	stagingWantBufBytes  = 8 << 20
	stagingMinBufs       = 2
	stagingMinBufBytes   = 1 << 20
	defaultWSLBudgetNote = "the WSL2 default"
)

// pinBudget counts the page-locked host memory Open allocates against a cap: under WSL2 the
// GPU driver grants the whole VM only about 1 GiB of it, and --pinned-budget-mib sets the cap
// anywhere (to simulate WSL2 on Linux). What does not fit falls back (placement.go, tiered).
type pinBudget struct {
	limit  int64  // bytes; 0 = no cap
	used   int64  // bytes taken so far
	source string // where limit came from, for messages
}

// newPinBudget resolves cfg.PinnedBudgetMiB: a positive value is the cap; 0 is the WSL2
// driver's budget when a GPU is used under WSL2 and no cap elsewhere (the driver's budget
// does not bind the OS's own page locking on the CPU backend).
func newPinBudget(cfg Config, wsl platform.WSL, onGPU bool) pinBudget {
	switch {
	case cfg.PinnedBudgetMiB > 0:
		return pinBudget{limit: int64(cfg.PinnedBudgetMiB) << 20, source: "--pinned-budget-mib"}
	case onGPU && wsl.WSL2 && wsl.PinnedBudgetBytes > 0:
		return pinBudget{limit: wsl.PinnedBudgetBytes, source: defaultWSLBudgetNote}
	}
	return pinBudget{}
}

// capped says whether a cap applies.
func (b *pinBudget) capped() bool { return b.limit > 0 }

// take counts n bytes when they fit and says whether they did.
func (b *pinBudget) take(n int64) bool {
	if b.limit > 0 && b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes taken for an allocation that did not happen.
func (b *pinBudget) give(n int64) { b.used = max(b.used-n, 0) }

// left is what is still free under the cap (-1 without one).
func (b *pinBudget) left() int64 {
	if b.limit <= 0 {
		return -1
	}
	return b.limit - b.used
}

// String names the budget for messages, e.g. "64 MiB (--pinned-budget-mib)".
func (b *pinBudget) String() string {
	if b.limit <= 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d MiB (%s)", b.limit>>20, b.source)
}

// tooSmall is the error for a need that even the fallbacks cannot meet.
func (b *pinBudget) tooSmall(what string, need int64) error {
	return fmt.Errorf("engine: %s needs at least %.1f MiB of page-locked host memory, but the pinned budget is %s with %.1f MiB left: raise --pinned-budget-mib to at least %d (under WSL2 the driver grants about %d MiB in all), or use --backend cpu: %w",
		what, mib(need), b.String(), mib(max(b.left(), 0)), (b.used+need+(1<<20)-1)>>20, platform.WSLPinnedBudgetBytes>>20, ErrBudgetTooSmall)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// stagingFor takes the GPU's staging ring from b: as many full-size buffers as fit (at
// least stagingMinBufs), else the minimum count of smaller ones. It returns the ring's shape
// and what fell back ("" when nothing did).
func stagingFor(b *pinBudget) (bufs, bufBytes int, fallback string, err error) {
	minNeed := int64(stagingMinBufs * stagingMinBufBytes)
	if l := b.left(); l >= 0 && l < minNeed {
		return 0, 0, "", b.tooSmall("the GPU's smallest ring of staging buffers", minNeed)
	}
	for n := stagingWantBufs; n >= stagingMinBufs; n-- {
		if b.take(int64(n) * stagingWantBufBytes) {
			if n < stagingWantBufs {
				fallback = fmt.Sprintf("%d staging buffers of %d MiB instead of %d", n, stagingWantBufBytes>>20, stagingWantBufs)
			}
			return n, stagingWantBufBytes, fallback, nil
		}
	}
	size := int64(stagingWantBufBytes)
	for size > stagingMinBufBytes && !b.take(stagingMinBufs*size) {
		size /= 2
	}
	if size == stagingMinBufBytes {
		b.take(stagingMinBufs * size) // fits: checked above
	}
	return stagingMinBufs, int(size), fmt.Sprintf("%d staging buffers of %d KiB instead of %d of %d MiB", stagingMinBufs, size>>10, stagingWantBufs, stagingWantBufBytes>>20), nil
}

// stagingShare is stagingFor holding the ring to a 1/parts share of what is left of a capped
// budget (never below the smallest ring), so the rings and rows taken after it get theirs
// too: with helper GPUs, the main card's ring, each helper's and the helpers' result rows.
func stagingShare(b *pinBudget, parts int) (bufs, bufBytes int, fallback string, err error) {
	minNeed := int64(stagingMinBufs * stagingMinBufBytes)
	if !b.capped() || parts <= 1 || b.left() < minNeed {
		return stagingFor(b)
	}
	sub := pinBudget{limit: max(b.left()/int64(parts), minNeed), source: b.source}
	if bufs, bufBytes, fallback, err = stagingFor(&sub); err != nil {
		return 0, 0, "", err
	}
	b.take(sub.used)
	return bufs, bufBytes, fallback, nil
}
