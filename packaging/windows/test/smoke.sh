#!/bin/sh
# smoke.sh SETUP.exe: the Windows installer's smoke test under wine64 and Xvfb.
#   1. a fresh wine prefix, plus our test-only bcryptprimitives.dll (processprng.c);
#   2. SETUP.exe /S: files, Start-menu shortcut, uninstall and .gguf registry entries exist;
#   3. strata-cli.exe hw --json prints valid JSON;
#   4. the installed strata.exe opens a window titled Strata, and a screenshot of the screen
#      is not blank (OUTDIR/wine-window.png);
#   5. uninstall.exe /S removes the program files, shortcut and registry entries but keeps
#      chats and settings; a second install + uninstall.exe /S /PURGE deletes those too.
# Run from the repository root. Needs wine64, xvfb, imagemagick, jq, mingw-w64.
set -eu
setup=$(readlink -f "$1")
OUTDIR=${OUTDIR:-dist/test}
mkdir -p "$OUTDIR"
out=$(cd "$OUTDIR" && pwd)

if [ -z "${STRATA_SMOKE_IN_XVFB:-}" ]; then
	STRATA_SMOKE_IN_XVFB=1 exec xvfb-run -a -s "-screen 0 1280x800x24" sh "$0" "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-wine.XXXXXX")
# wine links the prefix's Desktop to $HOME and writes menu entries under it: give it its own.
mkdir -p "$work/home"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share"
export WINEPREFIX="$work/prefix" WINEARCH=win64 WINEDEBUG=-all
# No Mono/Gecko download prompts, no Linux menu entries for the Windows shortcuts.
export WINEDLLOVERRIDES="mscoree,mshtml=,winemenubuilder.exe=d"
wine=$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)
cleanup() {
	wineserver -k 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP # so the EXIT trap cleans up when stopped too
fail() {
	echo "smoke (windows): FAIL: $*" >&2
	exit 1
}
step() { echo "smoke (windows): $*"; }

step "wine prefix"
"$wine" wineboot --init >"$work/wineboot.log" 2>&1 || { cat "$work/wineboot.log" >&2; fail "wineboot"; }
wineserver -w
x86_64-w64-mingw32-gcc -shared -O2 -s -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
	packaging/windows/test/processprng.c packaging/windows/test/processprng.def -ladvapi32

user=$(ls "$WINEPREFIX/drive_c/users" | grep -vx Public | head -n1)
home="$WINEPREFIX/drive_c/users/$user"
inst="$home/AppData/Local/Programs/Strata"
startmenu="$home/AppData/Roaming/Microsoft/Windows/Start Menu/Programs/Strata.lnk"
desktop="$home/Desktop/Strata.lnk"
uninst_key='HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Strata'
regq() { "$wine" reg query "$@" >/dev/null 2>&1; }

install() {
	"$wine" "$setup" /S
	wineserver -w
	for f in strata.exe strata-cli.exe uninstall.exe; do
		[ -f "$inst/$f" ] || fail "install: $inst/$f is missing"
	done
	[ -f "$startmenu" ] || fail "install: no Start-menu shortcut"
	[ -f "$desktop" ] || fail "install: no desktop shortcut"
	regq "$uninst_key" /v DisplayVersion || fail "install: no uninstall entry with DisplayVersion"
	regq "$uninst_key" /v EstimatedSize || fail "install: no EstimatedSize"
	regq 'HKCU\Software\Classes\SystemFileAssociations\.gguf\shell\Strata\command' || fail "install: no Open with Strata for .gguf"
}

uninstall() {
	"$wine" "$inst/uninstall.exe" "$@"
	wineserver -w # the uninstaller re-runs itself from a temporary copy and returns at once
	[ ! -e "$inst/strata.exe" ] && [ ! -e "$inst/strata-cli.exe" ] && [ ! -e "$inst/uninstall.exe" ] ||
		fail "uninstall: program files left in $inst"
	[ ! -e "$inst" ] || fail "uninstall: $inst is left"
	[ ! -e "$startmenu" ] || fail "uninstall: Start-menu shortcut left"
	[ ! -e "$desktop" ] || fail "uninstall: desktop shortcut left"
	! regq "$uninst_key" || fail "uninstall: uninstall entry left"
	! regq 'HKCU\Software\Classes\SystemFileAssociations\.gguf\shell\Strata' || fail "uninstall: .gguf verb left"
}

step "silent install"
install
"$wine" reg query "$uninst_key" /v DisplayVersion | tr -d '\r' | grep DisplayVersion

step "strata-cli hw --json"
"$wine" "$inst/strata-cli.exe" hw --json >"$work/hw.json" 2>"$work/hw.err" || { cat "$work/hw.err" >&2; fail "strata-cli hw --json exited with $?"; }
tr -d '\r' <"$work/hw.json" | jq -e 'type == "object"' >/dev/null || { cat "$work/hw.json" "$work/hw.err" >&2; fail "hw --json is not a JSON object"; }
tr -d '\r' <"$work/hw.json" | jq -c 'keys' | cut -c1-200

step "open strata.exe"
import -window root "$work/before.png"
"$wine" "$inst/strata.exe" >"$work/app.log" 2>&1 &
app=$!
n=0
until xwininfo -root -tree 2>/dev/null | grep -q '"Strata"'; do
	n=$((n + 1))
	if [ $n -gt 240 ] || ! kill -0 $app 2>/dev/null; then
		cat "$work/app.log" >&2
		fail "no window titled Strata within 120 s"
	fi
	sleep 0.5
done
sleep 8 # let the first frames draw (software OpenGL under wine is slow)
import -window root "$out/wine-window.png"
colors=$(convert "$out/wine-window.png" -format '%k' info:)
before=$(convert "$work/before.png" -format '%k' info:)
step "screenshot $OUTDIR/wine-window.png: $colors colours (empty screen: $before)"
[ "$colors" -gt 16 ] || fail "the window looks blank ($colors colours)"
# Chats and settings the app writes, or a marker if it wrote none yet.
mkdir -p "$home/AppData/Roaming/strata"
echo '{}' >"$home/AppData/Roaming/strata/smoke-marker.json"
kill $app 2>/dev/null || true
wineserver -k || true
wineserver -w

step "silent uninstall (keeps chats and settings)"
uninstall /S
[ -f "$home/AppData/Roaming/strata/smoke-marker.json" ] || fail "silent uninstall deleted the user's settings"

step "install again, silent uninstall /PURGE (deletes chats and settings)"
install
uninstall /S /PURGE
[ ! -e "$home/AppData/Roaming/strata" ] || fail "/PURGE left $home/AppData/Roaming/strata"
step "ok"
