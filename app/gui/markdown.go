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
// last segment it saw was inline. Links become text with their address in brackets: Fyne
// does not wrap a link, and the row width it leaves after one can be less than nothing, so
// the text after it fell into a column of letters even with a wrapPoint.
func markWrapPoints(segs []widget.RichTextSegment, afterInline bool) bool {
	for i, seg := range segs {
		if block, ok := seg.(widget.RichTextBlock); ok {
			afterInline = markWrapPoints(block.Segments(), afterInline)
			continue
		}
		if link, ok := seg.(*widget.HyperlinkSegment); ok {
			text := link.Text
			if link.URL != nil && link.URL.String() != text {
				text += " (" + link.URL.String() + ")"
			}
			seg = &widget.TextSegment{Style: widget.RichTextStyleInline, Text: text}
			segs[i] = seg
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
// written. Code spans are found as CommonMark finds them: a backslash escapes a backtick,
// and a run of backticks opens a span only where a run as long closes it before the
// paragraph ends; other backticks are text. The spans added here are fenced with more
// backticks than any run in md, so no backtick of the text pairs with them, and tags that
// follow each other share one span. Autolinks (<https://…>) stay links.
func escapeHTML(md string) string {
	if !strings.Contains(md, "<") {
		return md
	}
	fence := strings.Repeat("`", longestBacktickRun(md)+1)
	var b strings.Builder
	for i := 0; i < len(md); i++ {
		c := md[i]
		if c == '\\' && i+1 < len(md) {
			switch {
			case md[i+1] == '`' || md[i+1] == '\\':
				b.WriteString(md[i : i+2]) // an escaped backtick or backslash
				i++
			case md[i+1] == '<' && tagRun(md[i+1:]) > 0:
				b.WriteString(`\` + wrapPoint) // the backslash stays text, not an escape of the fence
			default:
				b.WriteByte(c)
			}
			continue
		}
		if run := literalRun(md[i:]); run > 0 {
			// A backtick right before or after the span would join its fence: a
			// zero-width space keeps them apart.
			if strings.HasSuffix(b.String(), "`") {
				b.WriteString(wrapPoint)
			}
			text := md[i : i+run]
			if strings.HasPrefix(text, "`") || strings.HasSuffix(text, "`") {
				text = " " + text + " " // CommonMark strips one space each side
			}
			b.WriteString(fence + text + fence)
			if i+run < len(md) && md[i+run] == '`' {
				b.WriteString(wrapPoint)
			}
			i += run - 1
			continue
		}
		if c == '`' {
			n := backtickRun(md[i:])
			end := max(codeSpanEnd(md[i:], n), n) // no closing run: literal backticks
			b.WriteString(md[i : i+end])
			i += end - 1
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// literalRun is the length of the text at the start of s that must be shown as written
// in one code span: tags and the literal backticks (those no run closes) next to them, as
// long as it holds a tag; 0 when s does not start with such text.
func literalRun(s string) int {
	n, tags := 0, false
	for n < len(s) {
		if t := tagRun(s[n:]); t > 0 {
			n += t
			tags = true
			continue
		}
		if k := backtickRun(s[n:]); k > 0 && codeSpanEnd(s[n:], k) == 0 {
			n += k
			continue
		}
		break
	}
	if !tags {
		return 0
	}
	return n
}

// backtickRun is the number of backticks at the start of s.
func backtickRun(s string) int {
	n := 0
	for n < len(s) && s[n] == '`' {
		n++
	}
	return n
}

// longestBacktickRun is the length of the longest run of backticks in s.
func longestBacktickRun(s string) int {
	longest := 0
	for i := 0; i < len(s); i++ {
		if n := backtickRun(s[i:]); n > 0 {
			longest = max(longest, n)
			i += n - 1
		}
	}
	return longest
}

// codeSpanEnd is the length of the code span that opens with the n backticks at the
// start of s, through its closing run of exactly n backticks, or 0 when the paragraph has
// no such run.
func codeSpanEnd(s string, n int) int {
	for i := n; i < len(s); {
		switch {
		case s[i] == '`':
			m := backtickRun(s[i:])
			if m == n {
				return i + m
			}
			i += m
		case strings.HasPrefix(s[i:], "\n\n"):
			return 0
		default:
			i++
		}
	}
	return 0
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
