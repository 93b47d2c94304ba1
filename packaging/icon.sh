#!/bin/sh
# icon.sh draws Strata's icon (four rock layers in a rounded tile, bold enough to read at
# 16 px) with ImageMagick and writes assets/icon.png (256 px, used by Fyne and the AppImage)
# and assets/icon.ico (16-256 px, used by the installer). Run from the repository root.
set -eu
out=${1:-assets}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP # so the EXIT trap cleans up when stopped too
convert -size 256x256 xc:'#1f3a5f' \
	-fill '#f2c14e' -draw "path 'M0,92 C64,60 128,110 256,70 L256,256 L0,256 Z'" \
	-fill '#e07a2e' -draw "path 'M0,136 C72,108 150,150 256,118 L256,256 L0,256 Z'" \
	-fill '#b8432f' -draw "path 'M0,178 C80,152 160,190 256,162 L256,256 L0,256 Z'" \
	-fill '#5c2a2a' -draw "path 'M0,218 C88,196 170,228 256,204 L256,256 L0,256 Z'" \
	"$tmp/bands.png"
convert -size 256x256 xc:none -fill white -draw 'roundrectangle 8,8 247,247 44,44' "$tmp/mask.png"
convert "$tmp/bands.png" "$tmp/mask.png" -alpha off -compose CopyOpacity -composite \
	-depth 8 -strip "PNG32:$out/icon.png"
convert "$out/icon.png" -define icon:auto-resize=256,48,32,24,16 "$out/icon.ico"
