// Command strata is Strata's single entry point: with no arguments it opens the desktop app,
// with one .gguf file it opens the app on that model ("Open with Strata"), and with a
// subcommand it runs headless (see `strata help`).
package main

import (
	"os"
	"strings"

	"strata/app/cli"
)

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 0:
		os.Exit(openApp(""))
	case len(args) == 1 && strings.HasSuffix(strings.ToLower(args[0]), ".gguf"):
		os.Exit(openApp(args[0]))
	}
	os.Exit(cli.Main(args, cli.Stdio()))
}
