package review

import (
	"fmt"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// contextLines is how many unchanged lines a hunk shows around a change,
// as diff -u does.
const contextLines = 3

// maxDiffLines bounds the lines of one pair of files that are diffed line
// by line. The diff is Myers' (O(N·D)); past this a pair is shown as all
// of the old file removed and all of the new one added, so that a bundle
// of huge files costs a bounded time and the answer never depends on a
// clock (diffmatchpatch's timeout would make it depend on the machine).
const maxDiffLines = 10000

// line is one line of a unified diff: its mark (' ', '-' or '+'), its
// text without the newline, and whether the file ends there without one.
type line struct {
	mark      byte
	text      string
	noNewline bool
}

// unified is the unified diff of a file from before to after, labelled
// with the two names ("/dev/null" for a file added or removed), with
// contextLines of context. Equal texts have an empty diff.
func unified(fromName, toName, before, after string) string {
	if before == after {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", fromName, toName)
	for _, h := range hunks(lineDiff(before, after)) {
		h.write(&b)
	}
	return b.String()
}

// lineDiff is the line-by-line edit script from before to after.
func lineDiff(before, after string) []line {
	a, b := splitLines(before), splitLines(after)
	if len(a)+len(b) > maxDiffLines {
		return append(marked('-', a), marked('+', b)...)
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // optimal and the same on every machine
	ra, rb, table := dmp.DiffLinesToRunes(before, after)
	var out []line
	for _, d := range dmp.DiffCharsToLines(dmp.DiffMainRunes(ra, rb, false), table) {
		mark := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			mark = '-'
		case diffmatchpatch.DiffInsert:
			mark = '+'
		}
		out = append(out, marked(mark, splitLines(d.Text))...)
	}
	return out
}

// splitLines splits s after each newline; the last line of a file that
// does not end in one is marked noNewline.
func splitLines(s string) []line {
	var out []line
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, line{text: s, noNewline: true})
			break
		}
		out = append(out, line{text: s[:i]})
		s = s[i+1:]
	}
	return out
}

func marked(mark byte, ls []line) []line {
	for i := range ls {
		ls[i].mark = mark
	}
	return ls
}

// hunk is a run of the edit script with its place in both files.
type hunk struct {
	fromStart, fromCount int // 1-based, as the header shows them
	toStart, toCount     int
	lines                []line
}

// hunks groups the changes of an edit script with contextLines of
// context around each; changes at most twice that apart share a hunk.
func hunks(script []line) []hunk {
	// from[i] and to[i] are the line numbers script[i] has, or would
	// have, in each file.
	from, to := make([]int, len(script)), make([]int, len(script))
	var changes []int
	f, t := 1, 1
	for i, l := range script {
		from[i], to[i] = f, t
		if l.mark != '+' {
			f++
		}
		if l.mark != '-' {
			t++
		}
		if l.mark != ' ' {
			changes = append(changes, i)
		}
	}
	var out []hunk
	for k := 0; k < len(changes); k++ {
		first, last := changes[k], changes[k]
		for k+1 < len(changes) && changes[k+1]-last-1 <= 2*contextLines {
			k++
			last = changes[k]
		}
		start, end := max(0, first-contextLines), min(len(script), last+1+contextLines)
		h := hunk{fromStart: from[start], toStart: to[start], lines: script[start:end]}
		for _, l := range h.lines {
			if l.mark != '+' {
				h.fromCount++
			}
			if l.mark != '-' {
				h.toCount++
			}
		}
		out = append(out, h)
	}
	return out
}

// write writes the hunk as diff -u does; an empty side's start is the
// line before it, so a file added whole is "-0,0".
func (h hunk) write(b *strings.Builder) {
	from, to := h.fromStart, h.toStart
	if h.fromCount == 0 {
		from--
	}
	if h.toCount == 0 {
		to--
	}
	fmt.Fprintf(b, "@@ -%d,%d +%d,%d @@\n", from, h.fromCount, to, h.toCount)
	for _, l := range h.lines {
		b.WriteByte(l.mark)
		b.WriteString(l.text)
		b.WriteByte('\n')
		if l.noNewline {
			b.WriteString("\\ No newline at end of file\n")
		}
	}
}
