package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What the command line prints in text comes partly from instances: a
// record's runnerName, its signals' details and its runnerVersion are
// written by the agent, so by whoever holds root on the instance or its
// role's credentials. A terminal acts on control characters: an OSC 52
// sequence sets the operator's clipboard, CSI sequences move the cursor
// and erase lines, a newline in a detail prints a row of its own that
// looks like the table's. So every text the commands print passes through
// printable, once, in printf: the rows are the only thing the command line
// writes itself. --json needs none of it (encoding/json escapes control
// characters, and its reader is a program).

// printable is s with everything a terminal could act on, or that could
// hide or reorder what is shown, written as a Go-style escape: the C0
// controls (newline, carriage return, tab and escape among them), DEL and
// the C1 controls (unicode.IsControl); the format characters (Cf: the
// bidirectional overrides and isolates, zero-width characters); the line
// and paragraph separators (Zl, Zp); a byte that is not UTF-8. A backslash
// is doubled, so that what is shown reads back to one string only.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r == '\\' || unsafeRune(r) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < utf8.RuneSelf && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff && unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune says whether r is escaped by printable.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// printf is fmt.Fprintf with every string argument (of any string type,
// such as state.State) and every error made printable first. The format is
// the command line's own: its tabs and newlines make the table.
func printf(w io.Writer, format string, args ...any) {
	safe := make([]any, len(args))
	for i, a := range args {
		safe[i] = a
		switch v := a.(type) {
		case error:
			safe[i] = printable(v.Error())
		case nil:
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				safe[i] = printable(rv.String())
			}
		}
	}
	fmt.Fprintf(w, format, safe...)
}
