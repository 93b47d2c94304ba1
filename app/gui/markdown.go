package gui

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// proseView draws Markdown prose (no fenced code: splitBlocks takes that out), wrapped at
// word boundaries.
func proseView(md string) *widget.RichText {
	rt := widget.NewRichTextFromMarkdown(escapeHTML(md))
	markWrapPoints(rt.Segments, false)
	rt.Wrapping = fyne.TextWrapWord
	return rt
}

// wrapPoint starts every text segment that continues a row. Fyne 2.7 wraps a segment that
// begins where not even one character fits any more one character per row (a column of
// letters down the window, fyne-io/fyne#3711); a zero-width first character always fits,
// so the segment moves to the next row whole instead.
const wrapPoint = "\u200b"

// markWrapPoints puts a wrapPoint before each text segment that follows an inline segment
// (in drawing order, through blocks such as paragraphs and lists), and reports whether the
// last segment it saw was inline.
func markWrapPoints(segs []widget.RichTextSegment, afterInline bool) bool {
	for _, seg := range segs {
		if block, ok := seg.(widget.RichTextBlock); ok {
			afterInline = markWrapPoints(block.Segments(), afterInline)
			continue
		}
		if text, ok := seg.(*widget.TextSegment); ok && afterInline && !strings.HasPrefix(text.Text, wrapPoint) {
			text.Text = wrapPoint + text.Text
		}
		afterInline = seg.Inline()
	}
	return afterInline
}

// escapeHTML wraps HTML-looking tags ("<div>", "<unused_20>") that lie outside code spans
// in code spans: the Markdown renderer drops raw HTML, and model output must be shown as
// written. Autolinks (<https://…>) stay links.
func escapeHTML(md string) string {
	if !strings.Contains(md, "<") {
		return md
	}
	var b strings.Builder
	inCode := false
	for i := 0; i < len(md); i++ {
		c := md[i]
		switch {
		case c == '`':
			inCode = !inCode
		case c == '\n':
			inCode = false // code spans do not run across paragraphs in model output
		case c == '<' && !inCode:
			if end := tagEnd(md[i:]); end > 0 {
				tag := md[i : i+end]
				if strings.Contains(tag, "://") || strings.Contains(tag, "@") {
					break
				}
				fence := "`"
				if strings.Contains(tag, "`") {
					fence = "`` "
				}
				b.WriteString(fence + tag + reverse(fence))
				i += end - 1
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// tagEnd is the length of the tag at the start of s ("<x ...>"), or 0 when s does not
// start with one.
func tagEnd(s string) int {
	if len(s) < 3 {
		return 0
	}
	c := s[1]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '/' || c == '!' || c == '?') {
		return 0
	}
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '>':
			return j + 1
		case '<', '\n':
			return 0
		}
	}
	return 0
}

func reverse(s string) string {
	r := []byte(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// block is one piece of an answer: prose (rendered as Markdown) or a fenced code block
// (rendered monospace with a copy button).
type block struct {
	Code bool
	Lang string // the fence's info string, for code
	Text string
}

// splitBlocks cuts Markdown at fenced code blocks (``` or ~~~). An unclosed fence, as
// while an answer is still streaming, runs to the end.
func splitBlocks(md string) []block {
	var out []block
	var cur strings.Builder
	var fence, lang string
	inCode := false
	flush := func(code bool) {
		text := cur.String()
		cur.Reset()
		if code {
			out = append(out, block{Code: true, Lang: lang, Text: strings.TrimSuffix(text, "\n")})
			return
		}
		if strings.TrimSpace(text) != "" {
			out = append(out, block{Text: strings.Trim(text, "\n")})
		}
	}
	lines := strings.SplitAfter(md, "\n")
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case !inCode && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			flush(false)
			fence = trimmed[:3]
			lang = strings.TrimSpace(trimmed[3:])
			inCode = true
		case inCode && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "":
			flush(true)
			inCode = false
		default:
			cur.WriteString(line)
		}
	}
	flush(inCode)
	return out
}
