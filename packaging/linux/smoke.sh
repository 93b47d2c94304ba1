#!/bin/sh
# smoke.sh Strata-x86_64.AppImage: the AppImage's smoke test.
#   1. the type-2 magic "AI\x02" at offset 8 and a squashfs at --appimage-offset;
#   2. --appimage-extract-and-run hw --json prints valid JSON and removes its folder;
#   3. --appimage-extract writes squashfs-root with AppRun, the .desktop file and the icon;
#   4. run plainly (FUSE mount, or extract-and-run where FUSE cannot mount) under Xvfb, it
#      opens a window titled Strata; a screenshot (OUTDIR/appimage-window.png) is not blank;
#      stopping it leaves no mount or extracted folder behind.
# Needs xvfb, imagemagick, jq.
set -eu
img=$(readlink -f "$1")
OUTDIR=${OUTDIR:-dist/test}
mkdir -p "$OUTDIR"
out=$(cd "$OUTDIR" && pwd)

if [ -z "${STRATA_SMOKE_IN_XVFB:-}" ]; then
	STRATA_SMOKE_IN_XVFB=1 exec xvfb-run -a -s "-screen 0 1280x800x24" sh "$0" "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-appimage-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP # so the EXIT trap cleans up when stopped too
# The app's settings and chats, and the runtime's folders, stay in the test's folder.
export LANG=C.UTF-8 TMPDIR="$work/tmp" XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache"
mkdir -p "$TMPDIR"
fail() {
	echo "smoke (appimage): FAIL: $*" >&2
	exit 1
}
step() { echo "smoke (appimage): $*"; }
leftovers() { ls -A "$TMPDIR"; }

step "magic and offset"
[ "$(dd if="$img" bs=1 skip=8 count=3 status=none | od -An -tx1 | tr -d ' \n')" = 414902 ] || fail "no AI\\x02 at offset 8"
offset=$("$img" --appimage-offset)
[ "$(dd if="$img" bs=1 skip="$offset" count=4 status=none)" = hsqs ] || fail "no squashfs at offset $offset"

step "--appimage-extract-and-run hw --json"
"$img" --appimage-extract-and-run hw --json >"$work/hw.json" || fail "hw --json exited with $?"
jq -e 'type == "object"' "$work/hw.json" >/dev/null || { cat "$work/hw.json" >&2; fail "hw --json is not a JSON object"; }
jq -c keys "$work/hw.json" | cut -c1-200
[ -z "$(leftovers)" ] || fail "extract-and-run left $(leftovers) in TMPDIR"

step "--appimage-extract"
(cd "$work" && "$img" --appimage-extract)
for f in AppRun strata.desktop strata.png .DirIcon usr/bin/strata; do
	[ -e "$work/squashfs-root/$f" ] || fail "--appimage-extract: no $f"
done
[ -x "$work/squashfs-root/usr/bin/strata" ] || fail "--appimage-extract: usr/bin/strata is not executable"
cmp -s "$work/squashfs-root/strata.png" assets/icon.png || fail "--appimage-extract: the icon differs from assets/icon.png"

step "open the app"
LIBGL_ALWAYS_SOFTWARE=1 "$img" >"$work/app.log" 2>&1 &
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
sleep 3 # a few frames (software OpenGL)
import -window root "$out/appimage-window.png"
colors=$(convert "$out/appimage-window.png" -format '%k' info:)
if grep -q "FUSE mount failed" "$work/app.log"; then how="extract-and-run (FUSE could not mount here)"; else how="FUSE mount"; fi
step "screenshot $OUTDIR/appimage-window.png: $colors colours, ran by $how"
[ "$colors" -gt 16 ] || fail "the window looks blank ($colors colours)"
kill $app
wait $app 2>/dev/null || true
n=0
until [ -z "$(leftovers)" ]; do # the FUSE daemon unmounts when the app is gone
	n=$((n + 1))
	[ $n -le 20 ] || fail "left behind in TMPDIR: $(leftovers)"
	sleep 0.5
done
step "ok"
