package library

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"strata/app/store"
	"strata/engine"
	"strata/engine/gguf"
)

// DefaultModelsDir is where downloads go until the user picks another folder: "models" in
// Strata's data folder.
func DefaultModelsDir() (string, error) {
	d, err := store.DataDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "models"), nil
}

// ModelsDir is the models folder the settings name, or the default one.
func ModelsDir(s store.Settings) (string, error) {
	if s.ModelsDir != "" {
		return s.ModelsDir, nil
	}
	return DefaultModelsDir()
}

// LocalModel is a model in the models folder.
type LocalModel struct {
	Path         string   // the file to open (the first part of a split model)
	Parts        []string // every file of it
	Size         int64
	Architecture string // "" when the header cannot be read
	Err          error  // why the header could not be read
	LastUsed     time.Time
}

// Name is the file name shown for the model.
func (m LocalModel) Name() string { return filepath.Base(m.Path) }

// LocalModels lists the GGUF models in dir (not the parts after the first of a split
// model, nor unfinished downloads), newest use first, then by name. lastUsed gives a
// model's last use (zero for never).
func LocalModels(ctx context.Context, dir string, lastUsed func(path string) time.Time) ([]LocalModel, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("library: models folder: %w", err)
	}
	var out []LocalModel
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(strings.ToLower(name), ".gguf") {
			continue
		}
		if _, i, _, ok := gguf.ParseSplitPath(name); ok && i != 0 {
			continue
		}
		path := filepath.Join(dir, name)
		m := LocalModel{Path: path, Parts: gguf.SplitParts(path)}
		for _, p := range m.Parts {
			if st, err := os.Stat(p); err == nil {
				m.Size += st.Size()
			}
		}
		if info, err := engine.Inspect(ctx, path); err == nil {
			m.Architecture = info.Architecture
		} else {
			m.Err = err
		}
		if lastUsed != nil {
			m.LastUsed = lastUsed(path)
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].LastUsed.Equal(out[j].LastUsed) {
			return out[i].LastUsed.After(out[j].LastUsed)
		}
		return out[i].Name() < out[j].Name()
	})
	return out, nil
}

// Delete removes every file of a model and whatever Strata kept beside it for it
// (experts.bin is left: it may serve another model of the folder).
func (m LocalModel) Delete() error {
	var errs []error
	for _, p := range m.Parts {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		os.Remove(p + PartialSuffix)
	}
	os.Remove(m.Path + NoteSuffix)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("library: delete %s: %w", m.Name(), err)
	}
	return nil
}

// FirstPart is the file to open for path: the first part when path is a later part of a
// split model whose first part is beside it (a person may pick any part in a file
// dialog, or open any with "Open with Strata"); path itself otherwise.
func FirstPart(path string) string {
	prefix, i, n, ok := gguf.ParseSplitPath(path)
	if !ok || i == 0 {
		return path
	}
	first := gguf.SplitPath(prefix, 0, n)
	if _, err := os.Stat(first); err != nil {
		return path // the engine's message names what is missing
	}
	return first
}
