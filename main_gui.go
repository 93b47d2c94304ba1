//go:build !nogui

package main

import (
	"strata/app/gui"
	_ "strata/app/localeenv" // before Fyne reads the locale: no toolkit noise under LANG=C.UTF-8
)

// openApp runs the desktop app until its window closes; model ("" for none) is shown first.
func openApp(model string) int { return gui.Main(model) }
