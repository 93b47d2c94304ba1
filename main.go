// Command strata is Strata's single entry point: with no arguments it opens the desktop app,
// with a subcommand it runs headless (see `strata help`).
package main

import (
	"os"

	"strata/app/cli"
)

func main() {
	if len(os.Args) == 1 {
		os.Exit(openApp())
	}
	os.Exit(cli.Main(os.Args[1:], cli.Stdio()))
}
