package cli

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzCommandLine runs arbitrary command lines (arguments split at newlines) through Main:
// every command's flags and argument checks. It must never panic, and it exits 0, 1 or 2,
// with a usage line on 2. The fuzzer stays in an empty temporary folder (no model, no
// tokenizer to find), with a Hub address nothing answers; an argument with a path separator
// or "..", and synth with a preset or shape (it would write a model), are passed over.
func FuzzCommandLine(f *testing.F) {
	dir := f.TempDir()
	f.Chdir(dir)
	// The per-user folders a command may create things in are the temporary one too.
	for _, k := range []string{"HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "APPDATA", "LOCALAPPDATA"} {
		f.Setenv(k, dir)
	}
	f.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	f.Setenv("STRATA_LOG", "")
	for _, c := range commands() {
		f.Add(c.name)
		f.Add(c.name + "\n-h")
		f.Add(c.name + "\n-m\nm.gguf\n--json")
		f.Add(c.name + "\n--tokens\n1,,x\n-n\n-5\n--temp\nNaN")
		f.Add(c.name + "\n--expert-cache\nauto\n--pcie-frac\n2\n--threads\n-1\n-m\nm.gguf")
	}
	f.Add("run\n-m\nm.gguf\n-p\nhi\n--tokens\n1")
	f.Add("tokenize\n--tokenizer\nt.json\n--decode\n99999999999999999999")
	f.Add("pull\nowner/repo:file.gguf\n-o\nout")
	f.Add("serve\n-m\nm.gguf\n--port\n99999\n--host\n::")
	f.Add("nosuchcommand\n--x")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\n")
		for _, a := range args {
			if strings.ContainsAny(a, `/\`) || strings.Contains(a, "..") {
				t.Skip("stays in the temporary folder")
			}
		}
		if args[0] == "synth" && (strings.Contains(line, "preset") || strings.Contains(line, "shape")) {
			t.Skip("synth would write a model")
		}
		var out, errb bytes.Buffer
		code := Main(args, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		switch code {
		case 0, 1:
		case 2:
			if !strings.Contains(errb.String(), "usage") && !strings.Contains(errb.String(), "Usage") && !strings.Contains(errb.String(), "unknown command") {
				t.Errorf("%q: exit 2 without a usage line: %s", args, errb.String())
			}
		default:
			t.Errorf("%q: exit %d", args, code)
		}
	})
}
