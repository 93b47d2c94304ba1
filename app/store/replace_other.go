//go:build !windows

package store

import "os"

// replaceFile renames from over to; rename(2) replaces to atomically.
func replaceFile(from, to string) error { return os.Rename(from, to) }

// syncDir flushes the folder's entries, so a rename in it survives a power cut.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
