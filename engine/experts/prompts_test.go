package experts

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestPrompts(t *testing.T) {
	ps := Prompts()
	if len(ps) < 25 {
		t.Fatalf("%d prompts; the set should be varied", len(ps))
	}
	seen := map[string]bool{}
	var chars int
	for i, p := range ps {
		if strings.TrimSpace(p) == "" || !utf8.ValidString(p) {
			t.Errorf("prompt %d is empty or not UTF-8", i)
		}
		if seen[p] {
			t.Errorf("prompt %d is a duplicate", i)
		}
		seen[p] = true
		chars += utf8.RuneCountInString(p)
	}
	// A few thousand tokens: roughly 2,000-8,000 at 3-4 characters a token.
	if chars < 8000 || chars > 30000 {
		t.Errorf("%d characters in all; want a few thousand tokens", chars)
	}
	has := func(name string, ok func(string) bool) {
		for _, p := range ps {
			if ok(p) {
				return
			}
		}
		t.Errorf("no %s prompt", name)
	}
	script := func(tab *unicode.RangeTable) func(string) bool {
		return func(p string) bool { return strings.IndexFunc(p, func(r rune) bool { return unicode.Is(tab, r) }) >= 0 }
	}
	contains := func(subs ...string) func(string) bool {
		return func(p string) bool {
			for _, s := range subs {
				if !strings.Contains(p, s) {
					return false
				}
			}
			return true
		}
	}
	has("Chinese", script(unicode.Han))
	has("Russian", script(unicode.Cyrillic))
	has("Japanese", script(unicode.Hiragana))
	has("German", contains("ü", "Deutschland"))
	has("French", contains("Peux-tu"))
	has("Spanish", contains("¿"))
	has("Python code", contains("```python"))
	has("C code", contains("```c"))
	has("Go", contains("Go function"))
	has("SQL", contains("SQL"))
	has("maths", contains("integral"))
	has("summarisation", contains("Summarise"))
}
