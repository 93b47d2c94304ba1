package engine

import (
	"context"
	"errors"
	"io/fs"

	"strata/cuda"
	"strata/engine/experts"
	"strata/engine/gguf"
	"strata/engine/model"
)

// The kinds of failure a caller tells apart with errors.Is, to choose what to tell the user.
// Each is wrapped where the failure arises (the file system, the GGUF reader, the
// architecture table, the planner, the CUDA driver, the context), so the error text keeps
// its context (file, tensor, key, budget) and the kind survives every layer of wrapping.
var (
	// ErrNotFound: the model file (or another named file) does not exist.
	ErrNotFound = fs.ErrNotExist
	// ErrNotGGUF: the file is not a GGUF model at all.
	ErrNotGGUF = gguf.ErrNotGGUF
	// ErrDamaged: a GGUF file that is truncated or malformed.
	ErrDamaged = gguf.ErrMalformed
	// ErrUnsupportedArch: a GGUF model of an architecture Strata does not run.
	ErrUnsupportedArch = model.ErrUnsupportedArch
	// ErrBudgetTooSmall: a VRAM or host budget that cannot hold what the model needs.
	ErrBudgetTooSmall = experts.ErrBudgetTooSmall
	// ErrOutOfVRAM: the GPU ran out of memory.
	ErrOutOfVRAM = cuda.ErrOutOfMemory
	// ErrCanceled: the caller's context was cancelled.
	ErrCanceled = context.Canceled
	// ErrContextFull: the conversation no longer fits the context (ContextStop), or even
	// the newest message alone does not.
	ErrContextFull = errors.New("the conversation does not fit the context")
)
