#!/bin/sh
# build.sh builds the Windows executables into OUT (default dist/windows):
#   strata.exe      GUI subsystem, icon + version info + manifest, via `fyne package -release`
#   strata-cli.exe  console subsystem, -tags nogui (no Fyne), icon + version info via windres
# `fyne package` writes fyne.syso and a metadata .go file into the source folder and bumps
# Build in FyneApp.toml, so it runs on a copy of the working tree in a temporary folder: the
# checkout is never touched. -release builds with -trimpath, so the copy's path does not
# matter to the Go build cache. STRATA_REV=HEAD packages the last commit instead of the
# working tree (packaging/snapshot.sh). Run from the repository root.
set -eu
GO=${GO:-go}
FYNE_VERSION=v1.7.4
OUT=${OUT:-dist/windows}
CC=${CC_WIN:-x86_64-w64-mingw32-gcc}
WINDRES=${WINDRES:-x86_64-w64-mingw32-windres}

version=$(sed -n 's/^Version *= *"\(.*\)"/\1/p' FyneApp.toml)
build=$(sed -n 's/^Build *= *\([0-9]*\)/\1/p' FyneApp.toml)
[ -n "$version" ] && [ -n "$build" ] || { echo "build.sh: FyneApp.toml: no Version/Build" >&2; exit 1; }

src=$(mktemp -d "${TMPDIR:-/tmp}/strata-win.XXXXXX")
trap 'rm -rf "$src"' EXIT
trap 'exit 130' INT TERM HUP # so the EXIT trap cleans up when stopped too
sh packaging/snapshot.sh "$src"
mkdir -p "$OUT"
out=$(cd "$OUT" && pwd)

# The fyne tool runs here, so it is built for this machine (cached by go install).
GOBIN="$src/.tools" GOOS= GOARCH= CC= $GO install fyne.io/tools/cmd/fyne@$FYNE_VERSION

echo "windows: strata.exe (fyne package, GUI subsystem)"
(cd "$src" && GOARCH=amd64 CC="$CC" \
	.tools/fyne package -os windows -release -icon assets/icon.png -executable strata.exe >&2 &&
	mv Strata.exe "$out/strata.exe")

echo "windows: strata-cli.exe (console subsystem, -tags nogui)"
printf '#define STRATA_VERSION_COMMA %s,%s\n#define STRATA_VERSION_STR "%s.%s"\n' \
	"$(echo "$version" | tr . ,)" "$build" "$version" "$build" >"$src/version.h"
(cd "$src" && $WINDRES -I . -I assets -O coff -o strata-cli_windows_amd64.syso packaging/windows/cli.rc)
(cd "$src" && GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC="$CC" \
	$GO build -trimpath -tags nogui -ldflags "-s -w" -o "$out/strata-cli.exe" .)
ls -l "$out"/*.exe
