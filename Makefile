# Strata: `make run` opens Strata, `make test` runs every check CI runs.
# Both install what they need first (Debian/Ubuntu packages, Go tools).

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The desktop app (Fyne) needs OpenGL and the X11 headers; the native file dialog needs GTK 3.
APT_PKGS  := gcc g++ make mingw-w64 pkg-config libgl1-mesa-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev libxxf86vm-dev libgtk-3-dev
# make screenshots runs the app under a virtual X server with Mesa's software OpenGL.
SHOT_PKGS := xvfb imagemagick libgl1-mesa-dri
STATICCHECK_VERSION := v0.8.2
WIN_ENV   := GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc CXX=x86_64-w64-mingw32-g++

.PHONY: all deps build run screenshots test vet staticcheck unit windows fuzz fuzz-ci bench kernels clean

all: build

# deps installs the Debian packages that are missing (apt-get only when something is).
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi
	@[ -x $(GOBIN)/staticcheck ] || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GO) mod download

build: deps
	$(GO) build -o bin/strata .

# run opens the desktop app (welcome page on a first run; "Try the demo" needs no download).
run: build
	@if [ "$$(uname)" = Linux ] && [ -z "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
		echo "make run: no display here (DISPLAY is unset): run it from a desktop session; make screenshots shows the screens headless"; exit 1; fi
	./bin/strata

# screenshots runs the real app under Xvfb once per screen and saves docs/<screen>.png.
screenshots: build
	@missing=""; for p in $(SHOT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi
	sh app/screenshots.sh ./bin/strata docs

# vet also fails on a file gofmt would change (it lists them).
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-ed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(WIN_ENV) $(GO) vet ./...

staticcheck:
	$(GOBIN)/staticcheck ./...

unit:
	$(GO) test -count=1 ./...

# windows cross-builds the whole tree with mingw-w64, as the installer does.
windows:
	$(WIN_ENV) $(GO) build ./...
	$(WIN_ENV) $(GO) build -o bin/strata.exe .

test: deps vet staticcheck unit windows fuzz-ci

# fuzz runs every fuzz target for FUZZTIME each (crashers land in the package's
# testdata/fuzz, where they stay as regression inputs): the GGUF reader, tokenizer encode and
# decode, chat-template rendering, the chat and settings files, and the headless commands'
# command lines. Each target is pkg:name:count; make test runs it for count executions
# (FUZZTIME=ci), about 5 s each on the 2-core VM (rates of a CI run, 2026-12-02).
#
# CI counts executions rather than seconds: with a duration, go1.26's fuzz coordinator can
# report the deadline itself as a failure, "context deadline exceeded" with no failing input,
# when the time runs out while a worker is busy (go.dev/issue/75804, fixed in go1.27).
# FuzzSettingsFile and FuzzChatFile each failed a CI run that way at 3 and 5 s.
FUZZTIME ?= 3m
FUZZ_TARGETS := ./engine/gguf:FuzzOpen:100000 ./engine/tokenizer:FuzzEncodeDecode:10000 \
	./engine/tokenizer/chattmpl:FuzzRender:20000 ./app/store:FuzzChatFile:5000 \
	./app/store:FuzzSettingsFile:4000 ./app/cli:FuzzCommandLine:7000
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; count=$${rest#*:}; \
		time=$(FUZZTIME); if [ "$$time" = ci ]; then time=$${count}x; fi; \
		echo "fuzz $$pkg $$name for $$time"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$time $(FUZZFLAGS); \
	done

# fuzz-ci starts from the seeds: a corpus grown in the local Go cache by earlier runs can take
# long to replay. -fuzzminimizetime 20x bounds the minimisation of a new input (60 s by
# default; FuzzSettingsFile runs ~60-850 execs/s here).
fuzz-ci:
	$(GO) clean -fuzzcache
	$(MAKE) fuzz FUZZTIME=ci FUZZFLAGS="-fuzzminimizetime 20x"

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x ./engine/quant/

# kernels compiles cuda/kernels/*.cu with nvcc (on the GPU machine) into kernels.fatbin.gz and
# kernels.sha256, in $OUT when set, else in cuda/ where go:embed picks them up.
kernels:
	$(MAKE) -C cuda/kernels OUT=$${OUT:-$(CURDIR)/cuda}

clean:
	rm -rf bin dist

# --- Packaging (packaging/README.md) ---
# make dist: dist/Strata-Setup-VERSION.exe (NSIS, strata.exe + strata-cli.exe) and
# dist/Strata-x86_64.AppImage. make dist-test: their smoke tests (wine64 + Xvfb for the
# installer, Xvfb for the AppImage). STRATA_REV=HEAD packages the last commit instead of the
# working tree.
DIST_PKGS    := nsis wine wine64 xvfb xauth imagemagick libgl1-mesa-dri jq squashfs-tools zstd libsquashfuse-dev libfuse3-dev fuse3 libzstd-dev liblzma-dev liblz4-dev liblzo2-dev zlib1g-dev
DIST_VERSION := $(shell sed -n 's/^Version *= *"\(.*\)"/\1/p' FyneApp.toml)
SETUP_EXE    := dist/Strata-Setup-$(DIST_VERSION).exe
APPIMAGE     := dist/Strata-x86_64.AppImage

.PHONY: dist-deps installer appimage dist dist-test

dist-deps:
	@missing=""; for p in $(DIST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

installer: deps dist-deps
	GO=$(GO) sh packaging/windows/build.sh
	sh packaging/windows/installer.sh

appimage: deps dist-deps
	GO=$(GO) sh packaging/linux/appimage.sh

dist: installer appimage

dist-test: dist
	sh packaging/windows/test/smoke.sh $(SETUP_EXE)
	sh packaging/linux/smoke.sh $(APPIMAGE)
