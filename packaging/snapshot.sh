#!/bin/sh
# snapshot.sh DEST copies the source tree into DEST for a packaging build: the working tree
# (tracked and untracked-but-not-ignored files), or the commit STRATA_REV names when set
# (e.g. STRATA_REV=HEAD to package what is committed while the checkout is being edited).
# Run from the repository root.
set -eu
dest=$1
mkdir -p "$dest"
if [ -n "${STRATA_REV:-}" ]; then
	git archive --format=tar "$STRATA_REV" | tar -xf - -C "$dest"
elif ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Not a git checkout (a source tarball): everything but build outputs.
	tar --exclude=./dist --exclude=./bin --exclude=./.git -cf - . | tar -xf - -C "$dest"
else
	git ls-files -co --exclude-standard -z |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf - | tar -xf - -C "$dest"
fi
