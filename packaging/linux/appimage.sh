#!/bin/sh
# appimage.sh builds dist/Strata-x86_64.AppImage: our runtime (runtime.c, linked statically
# against Debian's squashfuse and fuse3) followed by a zstd squashfs of the AppDir (AppRun,
# strata.desktop, the icon, usr/bin/strata), with the type-2 magic "AI\x02" at offset 8.
# STRATA_BIN: a Linux build of strata to pack (default: go build of the working tree, or of
# the commit STRATA_REV names). Run from the repository root.
set -eu
GO=${GO:-go}
CC=${CC:-gcc}
OUT=${OUT:-dist/Strata-x86_64.AppImage}
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-appimage.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP # so the EXIT trap cleans up when stopped too

app=$work/AppDir
mkdir -p "$app/usr/bin" "$app/usr/share/applications" "$app/usr/share/icons/hicolor/256x256/apps"
if [ -n "${STRATA_BIN:-}" ]; then
	cp "$STRATA_BIN" "$app/usr/bin/strata"
elif [ -n "${STRATA_REV:-}" ]; then
	echo "appimage: go build (linux/amd64) of $STRATA_REV"
	sh packaging/snapshot.sh "$work/src"
	(cd "$work/src" && CGO_ENABLED=1 $GO build -trimpath -ldflags "-s -w" -o "$app/usr/bin/strata" .)
else
	echo "appimage: go build (linux/amd64)"
	# Same flags as make build except the linker's, so the build cache of make test is reused.
	CGO_ENABLED=1 $GO build -ldflags "-s -w" -o "$app/usr/bin/strata" .
fi
cp packaging/linux/AppRun "$app/AppRun"
cp packaging/linux/strata.desktop "$app/strata.desktop"
cp packaging/linux/strata.desktop "$app/usr/share/applications/strata.desktop"
cp assets/icon.png "$app/strata.png"
cp assets/icon.png "$app/usr/share/icons/hicolor/256x256/apps/strata.png"
ln -s strata.png "$app/.DirIcon"
chmod 755 "$app/AppRun" "$app/usr/bin/strata"

echo "appimage: runtime (static, squashfuse + fuse3)"
# shellcheck disable=SC2046 # pkg-config prints several flags
$CC -static -Os -s -Wall -Wextra -ffunction-sections -fdata-sections -Wl,--gc-sections \
	-o "$work/runtime" packaging/linux/runtime.c $(pkg-config --cflags squashfuse_ll fuse3) \
	-lsquashfuse_ll -lsquashfuse -lfuse3 -lzstd -llzma -llz4 -llzo2 -lz -lpthread -ldl 2>"$work/ld.log" ||
	{ cat "$work/ld.log" >&2; exit 1; }
# glibc warns that dlopen/getpwnam in a static binary need its own version at run time:
# fuse3 only reaches them for FUSE modules and user names, which the runtime never uses.
grep -v "statically linked applications requires\|in function \`" "$work/ld.log" >&2 || true

echo "appimage: squashfs (zstd)"
mksquashfs "$app" "$work/AppDir.squashfs" -comp zstd -root-owned -noappend -quiet >/dev/null

mkdir -p "$(dirname "$OUT")"
cat "$work/runtime" "$work/AppDir.squashfs" >"$OUT.tmp"
printf 'AI\002' | dd of="$OUT.tmp" bs=1 seek=8 conv=notrunc status=none
chmod 755 "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
ls -l "$OUT"
