package cli

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"strata/engine"
)

func runEval(ctx context.Context, args []string, io IO) error {
	fs := newFlags("eval", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	tokens := fs.String("tokens", "", "token ids: 1,2,3")
	out := fs.String("logits", "", "output file: float32 little-endian, [n_tokens x vocab]")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" || *tokens == "" || *out == "" {
		return usagef("-m MODEL, --tokens and --logits are required")
	}
	ids, err := parseIntList(*tokens)
	if err != nil {
		return usagef("--tokens: %v", err)
	}
	if len(ids) == 0 {
		return usagef("--tokens is empty")
	}
	m, err := engine.Open(ctx, *modelPath, cfg, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b [4]byte
	err = m.NewSession(engine.SessionOptions{}).Eval(ctx, ids, func(_ int, logits []float32) {
		for _, v := range logits {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			w.Write(b[:])
		}
	})
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("eval: %w", err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "wrote %d x %d logits to %s\n", len(ids), m.Info().Vocab, *out)
	return nil
}
