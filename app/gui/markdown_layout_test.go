package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

// streamedAnswer is prose the way models write it: inline code spans (some of them
// adjacent), tags, links and long unbroken words.
const streamedAnswer = "A Mixture-of-Experts layer sends each token to `top_k` of its `n_experts` experts; " +
	"the router's scores pick them (see `router.weight` and `ffn_gate_inp`). Tokens such as <unused_19><unused_180> " +
	"and <|im_end|> are shown as written. " +
	"A path: /home/someone/models/Qwen3-30B-A3B-Instruct-2507-UD-Q4_K_XL/experts.bin and a hash " +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef. " +
	"Call `engine.Open(ctx, path, cfg, onProgress)` then `m.NewSession(engine.SessionOptions{})` and " +
	"**stream** the answer with `s.Chat`; *italic* and `code` mix freely, `a``b` too. " +
	"Read the [engine guide](https://example.com/guide) and [notes](https://example.com/n) first.\n\n" +
	"- a list item with `inline code` at the end `x`\n- and a long one: `averyveryveryverylongidentifierwithoutanybreaks_in_it_at_all`"

// textRows lays rt out at width w and returns its rows of text, top to bottom.
func textRows(t *testing.T, rt *widget.RichText, w float32) []string {
	t.Helper()
	rt.Resize(fyne.NewSize(w, rt.MinSize().Height))
	rt.Resize(fyne.NewSize(w, rt.MinSize().Height))
	// Segments of one row have different tops (code is shorter than prose): a row is
	// what overlaps the first object's middle, in drawing order.
	var out []string
	mid := float32(-1)
	for _, o := range test.WidgetRenderer(rt).Objects() {
		txt, ok := o.(*canvas.Text)
		if !ok || !txt.Visible() || txt.Text == "" {
			continue
		}
		top, bottom := txt.Position().Y, txt.Position().Y+txt.Size().Height
		if len(out) == 0 || mid < top || mid > bottom {
			out = append(out, "")
			mid = (top + bottom) / 2
		}
		out[len(out)-1] += txt.Text
	}
	return out
}

// TestStreamedMarkdownKeepsLineWidth renders every prefix of an answer, as streaming
// does, at a few widths: no row but the last may hold a lone character (Fyne lays a segment that starts
// in the last pixels of a row out one character per row).
func TestStreamedMarkdownKeepsLineWidth(t *testing.T) {
	test.NewTempApp(t)
	runes := []rune(streamedAnswer)
	for _, w := range []float32{360, 517, 640} {
		for n := 8; n <= len(runes); n += 3 {
			for _, b := range splitBlocks(string(runes[:n])) {
				rows := textRows(t, proseView(b.Text), w)
				for i, r := range rows {
					// The last row may be the start of a word still being written.
					if i < len(rows)-1 && len([]rune(strings.TrimSpace(strings.ReplaceAll(r, "\u200b", "")))) == 1 {
						t.Fatalf("width %.0f, %d runes streamed: row %d is one character %q; rows:\n%s", w, n, i, r, strings.Join(rows, "\n"))
					}
				}
			}
		}
	}
}
