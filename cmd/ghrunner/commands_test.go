package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpCommands are the commands --help lists, with their usage's
// argument: the first word of each line of its Commands section that
// starts a command (a continuation line is indented further).
func helpCommands(t *testing.T) map[string]string {
	t.Helper()
	code, _, errOut := cli(t, "--help")
	_, list, ok := strings.Cut(errOut, "\nCommands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	if code != 0 || !ok {
		t.Fatalf("--help: exit %d, no Commands section:\n%s", code, errOut)
	}
	line := regexp.MustCompile(`^  ([a-z]+)( <([A-Za-z]+)>)? +\S`)
	out := map[string]string{}
	for _, l := range strings.Split(list, "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			if _, twice := out[m[1]]; twice {
				t.Errorf("--help lists %s twice", m[1])
			}
			out[m[1]] = m[3]
		}
	}
	return out
}

// Issue 39 item 12: one table says the commands. --help lists each of
// them once, with its argument and a line saying what it does, and lists
// nothing the command line does not run; each one listed answers its own
// --help with the usage line --help implies.
func TestHelpListsExactlyTheCommandsTheCommandLineRuns(t *testing.T) {
	listed := helpCommands(t)
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
		arg, ok := listed[c.name]
		if !ok || arg != c.arg {
			t.Errorf("--help lists %s with argument %q (listed: %v), want %q", c.name, arg, ok, c.arg)
		}
	}
	for name, arg := range listed {
		if !slices.Contains(names, name) {
			t.Errorf("--help lists %s, which the command line does not run", name)
			continue
		}
		want := "usage: ghrunner " + name
		if arg != "" {
			want += " <" + arg + ">"
		}
		if code, _, errOut := cli(t, name, "--help"); code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("%s --help: exit %d, want %q:\n%s", name, code, want, errOut)
		}
	}
	if code, _, errOut := cli(t, "--table", "t", "launch"); code != 2 || !strings.Contains(errOut, "one of "+strings.Join(names, ", ")) {
		t.Errorf("an unknown command: exit %d, want 2 naming the commands %v:\n%s", code, names, errOut)
	}
}
