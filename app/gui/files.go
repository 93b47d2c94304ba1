package gui

import (
	"errors"
	"fmt"

	"github.com/sqweek/dialog"
)

// errPickCancelled is a FilePicker's answer when the person closes the dialog.
var errPickCancelled = errors.New("no file chosen")

// FilePicker asks the person for a model file. The app uses the native dialog; tests pass
// their own so no window opens.
type FilePicker interface {
	// OpenGGUF blocks until a file is chosen (its path) or the dialog is closed
	// (errPickCancelled). It is called from a goroutine, never the UI goroutine.
	OpenGGUF() (string, error)
}

// nativeFiles is the operating system's open-file dialog (GTK on Linux, the common
// dialog on Windows) through github.com/sqweek/dialog.
type nativeFiles struct{}

func (nativeFiles) OpenGGUF() (string, error) {
	path, err := dialog.File().Title("Open a GGUF model").Filter("GGUF model (*.gguf)", "gguf").Load()
	if errors.Is(err, dialog.ErrCancelled) {
		return "", errPickCancelled
	}
	if err != nil {
		return "", fmt.Errorf("file dialog: %w", err)
	}
	return path, nil
}
