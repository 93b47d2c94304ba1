#!/bin/sh
# screenshots.sh BIN OUTDIR: runs the real Strata app under Xvfb (Mesa software GL) once per
# screen, with STRATA_SCREENSHOT=<screen> driving it there on the demo model, and saves
# OUTDIR/<screen>.png with ImageMagick's import. SIZE=WxH (default 1100x720) is the screen
# and the window's size. COLORS=N (default 256, 0 keeps every colour) reduces each picture to
# a palette, which keeps docs/*.png small. Used by `make screenshots`.
set -eu
bin=$1
out=$2
screens=${SCREENS:-welcome wizard picker library loading chat tiers settings}
mkdir -p "$out"
tmp=$(mktemp -d)
disp=:${SCREENSHOT_DISPLAY:-87}
size=${SIZE:-1100x720}
colors=${COLORS:-256}
Xvfb "$disp" -screen 0 "${size}x24" -nolisten tcp >"$tmp/xvfb.log" 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true; rm -rf "$tmp"' EXIT
sleep 1
for s in $screens; do
	log="$tmp/$s.log"
	: >"$log"
	data="$tmp/data"
	# The loading screen starts without a demo model, so it shows making one as well.
	[ "$s" = loading ] && data="$tmp/data-fresh"
	DISPLAY=$disp LIBGL_ALWAYS_SOFTWARE=1 LANG=C.UTF-8 \
		XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$data" \
		STRATA_SCREENSHOT=$s STRATA_SCREENSHOT_SIZE=$size "$bin" >"$log" 2>&1 &
	app=$!
	n=0
	until grep -q "screenshot ready" "$log"; do
		n=$((n + 1))
		if [ $n -gt 900 ] || ! kill -0 $app 2>/dev/null; then
			echo "screenshots: $s did not get ready:" >&2
			cat "$log" >&2
			kill $app 2>/dev/null || true
			exit 1
		fi
		sleep 0.2
	done
	import -display "$disp" -window root "$out/$s.png"
	[ "$colors" != 0 ] && convert "$out/$s.png" +dither -colors "$colors" "$out/$s.png"
	kill $app 2>/dev/null || true
	wait $app 2>/dev/null || true
	echo "screenshots: $out/$s.png"
done
