//go:build !nogui

package main

import "strata/app/gui"

// openApp runs the desktop app until its window closes; model ("" for none) is shown first.
func openApp(model string) int { return gui.Main(model) }
