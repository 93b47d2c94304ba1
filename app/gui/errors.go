package gui

import (
	"errors"
	"fmt"
	"io/fs"

	"strata/app/remote"
	"strata/app/store"
	"strata/engine"
)

// friendly turns an engine or store error into a sentence a person can act on: what went
// wrong in plain words and what to try next. The kind of failure is read from the error's
// type (engine.Err*, errors.Is), never from its text, which follows for bug reports.
func friendly(what string, err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, engine.ErrCanceled) {
		return what + " was cancelled."
	}
	if errors.As(err, new(*remote.Error)) {
		return what + " failed: " + err.Error() // already in plain words
	}
	return fmt.Sprintf("%s failed. %s\n\nDetails: %v", what, adviceFor(err), err)
}

// adviceFor says what to try next for each kind of failure.
func adviceFor(err error) string {
	var flagErr *engine.ConfigError
	switch {
	case errors.Is(err, engine.ErrContextFull):
		return "This chat has reached the model's context length. Start a new chat, or in Settings choose to drop the oldest turns (the system prompt is kept)."
	case errors.Is(err, engine.ErrNotGGUF):
		return "This file is not a GGUF model. Pick a file ending in .gguf (for example a Qwen3-30B-A3B Q4_K_M download)."
	case errors.Is(err, engine.ErrUnsupportedArch):
		return "Strata does not run this model's architecture yet. Try a Qwen3-MoE model such as Qwen3-30B-A3B."
	case errors.Is(err, engine.ErrOutOfVRAM):
		return "The graphics card ran out of memory. Open Settings and try a shorter context (8k), fewer expert slots, or close other programs that use the GPU."
	case errors.Is(err, engine.ErrBudgetTooSmall):
		return "There is not enough memory for this model with these settings. Open Settings and try a shorter context (8k), fewer expert slots, or a smaller host reserve."
	case errors.Is(err, engine.ErrDamaged):
		return "The model file looks damaged or incomplete. Download it again and check its size."
	case errors.Is(err, engine.ErrNotFound) || errors.Is(err, errNoFile):
		return "The file is not there any more. Pick it again with Open GGUF…"
	case errors.Is(err, fs.ErrPermission):
		return "Strata is not allowed to read or write that file. Check its permissions or move it to your user folder."
	case errors.Is(err, store.ErrCorrupt):
		return "The damaged file was moved aside (its name is below) and Strata goes on without it."
	case errors.As(err, &flagErr) && flagErr.NotBuilt:
		return "This build of Strata cannot do that yet. Open Settings and set --" + flagErr.Flag + " back to its default, or update Strata."
	case errors.As(err, &flagErr):
		return "A setting has a value Strata cannot use. Open Settings and correct it."
	}
	return "Try again; if it keeps happening, open Settings and go back to the defaults."
}

// errNoFile is returned when a chosen path is gone.
var errNoFile = errors.New("file not found")
