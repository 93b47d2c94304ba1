#!/bin/bash
# build.sh SRC OUT [strata] [pkg dirs...]: binaries for the GPU machine with an empty embedded
# fatbin (run them with STRATA_CUDA_FATBIN pointing at one): strata and <pkg>.test in OUT.
set -e
src=$1; out=$2; shift 2
tmp=$(mktemp -d /tmp/bld.XXXX)
git -C "$src" ls-files -z --cached --others --exclude-standard | (cd "$src" && tar cf - --null -T -) | tar xf - -C "$tmp"
printf '' | gzip > "$tmp/cuda/kernels.fatbin.gz"
mkdir -p "$out"
cd "$tmp"
for p in "$@"; do
	if [ "$p" = strata ]; then go build -tags nogui -ldflags "-s -w" -o "$out/strata" .; continue; fi
	go test -c -o "$out/$(basename $p).test" "./$p"
done
rm -rf "$tmp"
ls -la "$out"
