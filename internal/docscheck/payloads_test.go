package docscheck

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
)

// invokeLine is a shell line that calls a function: invoke.sh, or the
// AWS CLI's lambda invoke (whose payload is often written just before).
var invokeLine = regexp.MustCompile(`invoke\.sh |aws lambda invoke `)

// Issue 40 item 5: a payload naming a run goes to provision or release
// only with the invoking job's token, which the functions require
// (idtoken's Verify refuses an empty one). Outside a workflow job,
// invoke.sh sends the payload as given, so every example run by hand
// (README.md, examples/workflows/README.md) that names a runId names an
// idToken too, on its line or in the payload file written before it. The
// guide's invoke.sh blocks run as workflow jobs, where invoke.sh adds it.
func TestTheHandRunInvokeExamplesCarryATokenTheFunctionsRequire(t *testing.T) {
	v, err := idtoken.New("https://token.actions.githubusercontent.com", idtoken.DefaultAudience, idtoken.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("a payload without idToken: %v; the functions no longer require it, so this test's rule is moot", err)
	}
	for _, name := range []string{"README.md", "examples/workflows/README.md"} {
		lines := strings.Split(read(t, name), "\n")
		checked := 0
		for i, l := range lines {
			if !invokeLine.MatchString(l) || strings.HasPrefix(strings.TrimSpace(l), "|") {
				continue
			}
			payload := l
			if i > 0 && strings.Contains(l, "fileb://") {
				payload = lines[i-1] + "\n" + l
			}
			if !strings.Contains(payload, `"runId"`) {
				continue
			}
			checked++
			if !strings.Contains(payload, `"idToken"`) {
				t.Errorf("%s:%d: a payload with a runId and no idToken, which provision and release refuse (idToken: required):\n%s", name, i+1, payload)
			}
		}
		if checked == 0 {
			t.Errorf("%s: no invoke example with a runId found; the test reads nothing", name)
		}
	}
}
