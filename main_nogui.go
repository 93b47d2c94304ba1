//go:build nogui

package main

import (
	"fmt"
	"os"
)

// openApp: this build (-tags nogui, for servers and the GPU test machine) has no GUI toolkit.
func openApp(string) int {
	fmt.Fprintln(os.Stderr, "strata: this build has no desktop app (built with -tags nogui); run `strata help` for the headless commands")
	return 2
}
