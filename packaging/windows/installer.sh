#!/bin/sh
# installer.sh wraps BINDIR's strata.exe and strata-cli.exe (from build.sh) into the NSIS
# installer OUT (default dist/Strata-Setup-VERSION.exe). Run from the repository root.
set -eu
BINDIR=${BINDIR:-dist/windows}
version=$(sed -n 's/^Version *= *"\(.*\)"/\1/p' FyneApp.toml)
build=$(sed -n 's/^Build *= *\([0-9]*\)/\1/p' FyneApp.toml)
OUT=${OUT:-dist/Strata-Setup-$version.exe}
for f in strata.exe strata-cli.exe; do
	[ -f "$BINDIR/$f" ] || { echo "installer.sh: $BINDIR/$f is missing (run packaging/windows/build.sh)" >&2; exit 1; }
done
mkdir -p "$(dirname "$OUT")"
makensis -V2 -DVERSION="$version" -DBUILD="$build" -DBINDIR="$(cd "$BINDIR" && pwd)" \
	-DOUTFILE="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")" packaging/windows/strata.nsi
ls -l "$OUT"
