package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteFileAtomic writes data to path so that a reader, a killed process or a power cut sees
// either the old file or the new one, never an empty or half-written one: the bytes go to a
// temporary file in the same folder and are flushed to disk, the temporary file replaces
// path (rename on Linux; MoveFileEx with write-through on Windows), and the folder itself is
// flushed so the new name survives a power cut.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store: %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, tempPrefix(path)+"*"+tempSuffix)
	if err != nil {
		return fmt.Errorf("store: %s: %w", path, err)
	}
	tmpName := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmpName)
		return fmt.Errorf("store: %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("store: %s: %w", path, err)
	}
	if err := replaceFile(tmpName, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("store: %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("store: %s: flush the folder after the rename: %w", dir, err)
	}
	return nil
}

// tempSuffix ends the name of a file WriteFileAtomic has not finished.
const tempSuffix = ".tmp"

// tempPrefix starts the temporary names of path: hidden, so List never reads one.
func tempPrefix(path string) string { return "." + filepath.Base(path) + "." }

// removeStaleTemps deletes what a killed writer left of path: its temporary files. A
// temporary file is never the only copy (path is replaced only by a finished one).
func removeStaleTemps(path string) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), globQuote(tempPrefix(path))+"*"+tempSuffix))
	for _, m := range matches {
		os.Remove(m)
	}
}

// globQuote escapes the pattern characters of a literal file name for filepath.Glob.
func globQuote(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`)
	if filepath.Separator == '\\' {
		return s // no escapes on Windows; Strata's own names hold no pattern characters
	}
	return r.Replace(s)
}

// MoveAside renames a damaged file out of the way (path.corrupt-<time>) so the app can start
// without it and the user can still recover it, and returns the new name.
func MoveAside(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format("20060102-150405.000")
	if err := replaceFile(path, aside); err != nil {
		return "", fmt.Errorf("store: move %s aside: %w", path, err)
	}
	return aside, nil
}

// ErrCorrupt marks a file that exists but does not parse; it has been moved aside.
var ErrCorrupt = errors.New("damaged file moved aside")
