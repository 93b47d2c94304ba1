package gui

import "strings"

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
