//go:build !nogui

package main

import "strata/app/gui"

// openApp runs the desktop app until its window closes.
func openApp() int { return gui.Main() }
