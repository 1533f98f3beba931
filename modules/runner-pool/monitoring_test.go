package runnerpool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 40 item 4: the module's monitoring defaults to alarms with no
// topic, which notify no one; plan says so, loudly, and says nothing of
// the kind when alarm_emails gives the alarms a topic (made in the same
// apply, so unknown at plan).
func TestTheModulesPlanWarnsWhenNoAlarmNotifiesAnyone(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	withEmails := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	const emails = `  monitoring           = { alarm_emails = ["oncall@example.com"] }` + "\n"
	if !strings.Contains(withEmails, emails) {
		t.Fatal("the test's configuration no longer sets monitoring's alarm_emails")
	}
	for _, c := range []struct {
		name, cfg string
		warn      bool
	}{
		{"monitoring left at its default", strings.Replace(withEmails, emails, "", 1), true},
		{"monitoring with alarm_emails", withEmails, false},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(c.cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
		out := strings.Join(strings.Fields(tf(t, dir, cliConfig, "plan", "-input=false", "-no-color", "-lock=false")), " ")
		warned := strings.Contains(out, "Warning: The alarms notify no one") && strings.Contains(out, "monitoring.alarm_emails")
		if warned != c.warn {
			t.Errorf("%s: plan warned that no alarm notifies anyone: %v, want %v\n%s", c.name, warned, c.warn, out)
		}
	}
}
