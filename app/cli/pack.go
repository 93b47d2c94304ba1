package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"strata/engine/experts"
	"strata/engine/gguf"
)

// runPack writes experts.bin: `strata pack -m MODEL -o DIR`. Progress goes to stderr; the
// path, size and blob count to stdout.
func runPack(ctx context.Context, args []string, io IO) error {
	fs := newFlags("pack", io)
	modelPath := fs.String("m", "", "model GGUF file")
	dir := fs.String("o", "", "folder to write experts.bin in (the model's folder makes the engine use it)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	if *dir == "" {
		return usagef("-o DIR is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	f, err := gguf.Open(*modelPath)
	if err != nil {
		return err
	}
	defer f.Close()
	l, err := experts.GGUFLayout(f)
	if err != nil {
		return err
	}

	start := time.Now()
	lastPct := -1
	progress := func(done, total int64) {
		if pct := int(done * 100 / max(total, 1)); pct != lastPct {
			lastPct = pct
			fmt.Fprintf(io.Err, "\rpack: %3d%%  %s / %s  %s", pct, synthSize(done), synthSize(total),
				time.Since(start).Round(time.Second))
		}
	}
	path, err := experts.Pack(ctx, f, *dir, progress)
	fmt.Fprintln(io.Err)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "pack: done in %s (%.0f MB/s)\n", time.Since(start).Round(time.Millisecond),
		float64(st.Size())/1e6/max(time.Since(start).Seconds(), 1e-9))
	if !sameDir(*dir, filepath.Dir(*modelPath)) {
		fmt.Fprintf(io.Err, "pack: the engine uses experts.bin automatically only from the model's folder (%s)\n", filepath.Dir(*modelPath))
	}
	s := l.Shape
	fmt.Fprintf(io.Out, "%s  %s (%d bytes)  %d blobs (%d layers x %d experts, %d bytes each)\n",
		path, synthSize(st.Size()), st.Size(), s.Count(), s.Layers, s.Experts, s.BlobBytes())
	return nil
}

// sameDir reports whether a and b name the same folder.
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
