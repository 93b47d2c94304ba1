//go:build !linux

package experts

import "errors"

// evictFile is Linux-only: elsewhere cold-cache fills are not measured.
func evictFile(string) error { return errors.ErrUnsupported }
