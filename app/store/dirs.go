// Package store keeps what the desktop app remembers between runs: chats (one JSON file per
// chat in the user data folder) and settings (one JSON file in the user config folder). Every
// write is atomic. Folders are passed in, so tests use temporary ones.
package store

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// appDir is the folder name Strata uses under the per-user folders.
const appDir = "strata"

// ConfigDir is where settings.json lives: os.UserConfigDir()/strata
// (%AppData%\strata on Windows, ~/.config/strata on Linux).
func ConfigDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("store: user config folder: %w", err)
	}
	return filepath.Join(base, appDir), nil
}

// DataDir is where chats live: %LocalAppData%\strata on Windows, $XDG_DATA_HOME/strata
// (default ~/.local/share/strata) elsewhere.
func DataDir() (string, error) {
	if runtime.GOOS == "windows" {
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, appDir), nil
		}
		return ConfigDir()
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, appDir), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: user data folder: %w", err)
	}
	return filepath.Join(home, ".local", "share", appDir), nil
}
