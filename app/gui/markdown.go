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
// written. Tags that follow each other share one span (two spans side by side would read
// as a double-backtick fence). Autolinks (<https://…>) stay links.
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
			if run := tagRun(md[i:]); run > 0 {
				b.WriteString(codeSpan(md[i : i+run]))
				i += run - 1
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// tagRun is the length of the tags that follow each other at the start of s, or 0 when s
// does not start with one (an autolink is not a tag here).
func tagRun(s string) int {
	n := 0
	for n < len(s) {
		end := tagEnd(s[n:])
		if end == 0 {
			break
		}
		if tag := s[n : n+end]; strings.Contains(tag, "://") || strings.Contains(tag, "@") {
			break
		}
		n += end
	}
	return n
}

// codeSpan fences s as inline code with more backticks than any run inside it, padded with
// spaces when s starts or ends with one (CommonMark strips one space each side).
func codeSpan(s string) string {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
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
