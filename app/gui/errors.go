package gui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"strata/app/remote"
)

// friendly turns an engine or store error into a sentence a person can act on: what went
// wrong in plain words and what to try next. The technical text follows for bug reports.
func friendly(what string, err error) string {
	if err == nil {
		return ""
	}
	msg := strings.ToLower(err.Error())
	var advice string
	switch {
	case errors.Is(err, context.Canceled):
		return what + " was cancelled."
	case errors.As(err, new(*remote.Error)):
		return what + " failed: " + err.Error() // already in plain words
	case strings.Contains(msg, "not built yet"):
		advice = "This build of Strata cannot do that yet (its engine is still being assembled). Update Strata and try again."
	case strings.Contains(msg, "magic") || strings.Contains(msg, "not a gguf") || strings.Contains(msg, "not gguf"):
		advice = "This file is not a GGUF model. Pick a file ending in .gguf (for example a Qwen3-30B-A3B Q4_K_M download)."
	case strings.Contains(msg, "architecture"):
		advice = "Strata does not run this model's architecture yet. Try a Qwen3-MoE model such as Qwen3-30B-A3B."
	case strings.Contains(msg, "out of memory") || strings.Contains(msg, "not enough memory") || strings.Contains(msg, "budget"):
		advice = "There is not enough memory for this model with these settings. Open Settings and try a shorter context (8k), fewer expert slots, or a smaller host reserve."
	case strings.Contains(msg, "truncated") || strings.Contains(msg, "out of bounds") || strings.Contains(msg, "unexpected eof"):
		advice = "The model file looks damaged or incomplete. Download it again and check its size."
	case errors.Is(err, errNoFile) || strings.Contains(msg, "no such file") || strings.Contains(msg, "cannot find"):
		advice = "The file is not there any more. Pick it again with Open GGUF…"
	case strings.Contains(msg, "permission") || strings.Contains(msg, "access is denied"):
		advice = "Strata is not allowed to read or write that file. Check its permissions or move it to your user folder."
	case strings.Contains(msg, "--"):
		advice = "A setting has a value Strata cannot use. Open Settings and correct it."
	default:
		advice = "Try again; if it keeps happening, open Settings and go back to the defaults."
	}
	return fmt.Sprintf("%s failed. %s\n\nDetails: %v", what, advice, err)
}

// errNoFile is returned when a chosen path is gone.
var errNoFile = errors.New("file not found")
