package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"strata/platform"
)

// warmChunk is how much of the mapping one step maps; Close waits for at most one step.
const warmChunk = 64 << 20

// warmer maps the model file's pages into the process in the background after a CPU load,
// so that the first prompt does not fault them in one by one: llama.cpp maps them while it
// loads (MAP_POPULATE); here the model is ready at once and the pages follow. On a 2-core VM
// a cached 30b-a3b file (17 GB) took 1.1-1.7 s, and the first 64-token prefill after it went
// from a median of 17.5 to 20.3 tokens/s (four runs each), as fast as the second one.
type warmer struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has stopped
	sink   byte          // the pages read when populating is unsupported
}

// startWarm maps the pages of parts (the mappings of a model's files, several for a split
// GGUF) in the background, page by page where the OS cannot do it in one call (Windows,
// Linux before 5.14).
func startWarm(parts [][]byte, pageSize int, path string) *warmer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &warmer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t0 := time.Now()
		populate := true
		var total int
		for _, data := range parts {
			total += len(data)
			if !w.warm(ctx, data, pageSize, path, &populate) {
				return
			}
		}
		slog.Info("engine: the model's pages are mapped", "model", path, "bytes", total, "seconds", time.Since(t0).Seconds())
	}()
	return w
}

// warm maps data's pages; false when it was cancelled or stopped on an error.
func (w *warmer) warm(ctx context.Context, data []byte, pageSize int, path string, populate *bool) bool {
	for off := 0; off < len(data); off += warmChunk {
		if ctx.Err() != nil {
			return false
		}
		chunk := data[off:min(off+warmChunk, len(data))]
		if *populate {
			err := platform.PopulateRead(chunk)
			if err == nil {
				continue
			}
			if !errors.Is(err, errors.ErrUnsupported) {
				slog.Info("engine: mapping the model's pages ahead of use stopped", "model", path, "err", err)
				return false
			}
			*populate = false
		}
		w.sink += touchPages(chunk, pageSize)
	}
	return true
}

// touchPages reads one byte of every page of b.
func touchPages(b []byte, pageSize int) byte {
	var s byte
	for i := 0; i < len(b); i += pageSize {
		s += b[i]
	}
	return s
}

// stop ends the warm-up and waits for it: the mapping may be unmapped afterwards.
func (w *warmer) stop() {
	w.cancel()
	<-w.done
}

// warmFits says whether mapping a file of size bytes would stay within the RAM available
// (which counts the page cache, so a cached model fits): only then is it worth doing.
func warmFits(size, available int64) bool {
	return size > 0 && available > 0 && size <= available/10*9
}
