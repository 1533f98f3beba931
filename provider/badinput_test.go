package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// The provider's bad-input catalogue: one test per resource, named
// TestAcc<Resource>_badInput, so that -run TestAccPool runs a resource's bad
// input with the rest of its tests.

// badAttr is one row of the Terraform attribute catalogue: a configuration
// that terraform plan must refuse with a message holding want, which names
// the attribute (terraform prints it with the diagnostic) and the rule.
type badAttr struct {
	name, config, want string
}

// attrError matches terraform's diagnostic for attr however it wraps the
// text: the attribute's name, then the rule.
func attrError(attr, rule string) string {
	return regexp.QuoteMeta(attr) + `(.|\n)*` + strings.Join(quoteWords(rule), `\s+`)
}

func quoteWords(s string) []string {
	parts := strings.Fields(s)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return parts
}

// typeError is terraform's own refusal of a wrong type for attr.
func typeError(attr string) string {
	return `Incorrect attribute value type(.|\n)*` + regexp.QuoteMeta(attr)
}

func runBadAttrs(t *testing.T, rows []badAttr) {
	t.Helper()
	for _, c := range rows {
		t.Run(c.name, func(t *testing.T) {
			resource.ParallelTest(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				CheckDestroy:             checkDestroyed,
				Steps:                    []resource.TestStep{{Config: c.config, PlanOnly: true, ExpectError: regexp.MustCompile(c.want)}},
			})
		})
	}
}

func TestAccTable_badInput(t *testing.T) {
	table := func(attrs string) string {
		return providerConfig() + "resource \"ghrunner_table\" \"state\" {\n" + attrs + "\n}\n"
	}
	rule := "must be 3-255 characters of A-Z a-z 0-9 _ . -"
	runBadAttrs(t, []badAttr{
		{"name empty", table(`name = ""`), attrError("name", rule)},
		{"name with a space", table(`name = "ghr state"`), attrError("name", rule)},
		{"name with a slash", table(`name = "ghr/../state"`), attrError("name", rule)},
		{"name with shell", table(`name = "ghr;$(id)"`), attrError("name", rule)},
		{"name with NUL", table(`name = "ghr\u0000state"`), attrError("name", rule)},
		{"name of 256", table(fmt.Sprintf("name = %q", strings.Repeat("t", 256))), attrError("name", rule)},
		{"name a list", table(`name = ["ghr"]`), typeError("name")},
		{"pitr not a bool", table("name = \"ghr-state\"\npoint_in_time_recovery = \"maybe\""), typeError("point_in_time_recovery")},
		{"kms alias", table("name = \"ghr-state\"\nkms_key_arn = \"alias/ghr\""), attrError("kms_key_arn", "must be a KMS key ARN")},
		{"tags a list", table("name = \"ghr-state\"\ntags = [\"a\"]"), typeError("tags")},
		{"tag value a list", table("name = \"ghr-state\"\ntags = { a = [\"b\"] }"), typeError("tags")},
		// Tags reach IAM roles and instances: their rules are checked at
		// plan time, not met mid-apply or at a launch (issue 30, item 3).
		{"tag key reserved", table("name = \"ghr-state\"\ntags = { \"AWS:team\" = \"ci\" }"), attrError("tags", "must not begin with aws:")},
		{"tag key with a comma", table("name = \"ghr-state\"\ntags = { \"a,b\" = \"ci\" }"), attrError("tags", "must be 1-128 letters, digits, spaces")},
		{"tag key of 129", table(fmt.Sprintf("name = \"ghr-state\"\ntags = { %q = \"ci\" }", strings.Repeat("k", 129))), attrError("tags", "must be 1-128 letters")},
		{"tag value with a semicolon", table("name = \"ghr-state\"\ntags = { team = \"ci;rm\" }"), attrError("tags", "must be at most 256 letters")},
	})
}

func TestAccQueue_badInput(t *testing.T) {
	queue := func(attrs string) string {
		return providerConfig() + "resource \"ghrunner_queue\" \"linux\" {\n" + attrs + "\n}\n"
	}
	rule := "must be 1-80 characters of A-Z a-z 0-9 _ -"
	runBadAttrs(t, []badAttr{
		{"name with a slash", queue(`name = "a/b"`), attrError("name", rule)},
		{"name fifo", queue(`name = "pool.fifo"`), attrError("name", rule)},
		{"name with a comma", queue(`name = "linux,gpu"`), attrError("name", rule)},
		{"name with shell", queue("name = \"q`id`\""), attrError("name", rule)},
		{"name of 81", queue(fmt.Sprintf("name = %q", strings.Repeat("q", 81))), attrError("name", rule)},
		{"visibility negative", queue("name = \"q\"\nvisibility_timeout_seconds = -1"), attrError("visibility_timeout_seconds", "between 0 and 43200")},
		{"visibility fractional", queue("name = \"q\"\nvisibility_timeout_seconds = 1.5"), `visibility_timeout_seconds|fractional|integer`},
		{"visibility a string", queue("name = \"q\"\nvisibility_timeout_seconds = \"soon\""), typeError("visibility_timeout_seconds")},
		{"retention too short", queue("name = \"q\"\nmessage_retention_seconds = 59"), attrError("message_retention_seconds", "between 60 and 1209600")},
		{"retention too long", queue("name = \"q\"\nmessage_retention_seconds = 1209601"), attrError("message_retention_seconds", "between 60 and 1209600")},
		{"receive count without a dlq", queue("name = \"q\"\nmax_receive_count = 5"), `dead_letter_queue_arn`},
		{"dlq with shell", queue("name = \"q\"\ndead_letter_queue_arn = \"arn:aws:sqs:us-east-1:123456789012:dlq;rm\""), attrError("dead_letter_queue_arn", "must be the ARN of a standard SQS queue")},
	})
}

func TestAccFunction_badInput(t *testing.T) {
	fn := func(name, handler, extra string) string {
		return functionConfig("tbl-badinput", name, handler, extra)
	}
	withTable := func(table string) string {
		return strings.Replace(fn("fn-badinput", "provision", ""), "table            = ghrunner_table.state.name", "table = "+table, 1)
	}
	runBadAttrs(t, []badAttr{
		{"name with a space", fn("ci provision", "provision", ""), attrError("name", "must be 1-64 letters, digits, '-' or '_'")},
		{"name with a slash", fn("ci/provision", "provision", ""), attrError("name", "must be 1-64 letters, digits, '-' or '_'")},
		{"name of 65", fn(strings.Repeat("f", 65), "provision", ""), attrError("name", "must be 1-64 letters, digits, '-' or '_'")},
		{"handler case", fn("fn-badinput", "Provision", ""), attrError("handler", "value must be one of")},
		{"handler injection", fn("fn-badinput", "provision; rm -rf /", ""), attrError("handler", "value must be one of")},
		{"table wildcard", withTable(`"***"`), attrError("table", "must be 3-255 characters of A-Z a-z 0-9 _ . -")},
		{"table with a space", withTable(`"ghr state"`), attrError("table", "must be 3-255 characters")},
		{"parameter with a space", strings.Replace(fn("fn-badinput", "provision", ""), `"/ghrunner/acc/github"`, `"/ghrunner/acc github"`, 1), attrError("github_parameter", "must be an SSM parameter name")},
		{"parameter with shell", strings.Replace(fn("fn-badinput", "provision", ""), `"/ghrunner/acc/github"`, `"/ghrunner/$(id)"`, 1), attrError("github_parameter", "must be an SSM parameter name")},
		{"parameter of 1012", strings.Replace(fn("fn-badinput", "provision", ""), `"/ghrunner/acc/github"`, fmt.Sprintf("%q", "/"+strings.Repeat("p", 1011)), 1), attrError("github_parameter", "string length must be at most 1011")},
		{"memory too small", fn("fn-badinput", "provision", "memory_size = 127"), attrError("memory_size", "between 128 and 10240")},
		{"memory too large", fn("fn-badinput", "provision", "memory_size = 10241"), attrError("memory_size", "between 128 and 10240")},
		{"timeout zero", fn("fn-badinput", "provision", "timeout = 0"), attrError("timeout", "between 1 and 900")},
		{"concurrency below -1", fn("fn-badinput", "refresh", "reserved_concurrency = -2"), attrError("reserved_concurrency", "at least -1")},
		{"log level", fn("fn-badinput", "provision", `log_level = "trace"`), attrError("log_level", "value must be one of")},
		{"tags a string", fn("fn-badinput", "provision", `tags = "team=ci"`), typeError("tags")},
	})
}

func TestAccSchedule_badInput(t *testing.T) {
	fn := "arn:aws:lambda:us-east-1:123456789012:function:ghr-refresh"
	schedule := func(a scheduleArgs) string {
		if a.name == "" {
			a.name = "ghr-refresh"
		}
		if a.fn == "" {
			a.fn = fn
		}
		if a.expr == "" {
			a.expr = "rate(2 minutes)"
		}
		return scheduleConfig(a)
	}
	runBadAttrs(t, []badAttr{
		{"name with a space", schedule(scheduleArgs{name: "ghr refresh"}), attrError("name", "must be 1-64 characters of A-Z a-z 0-9 - _ .")},
		{"name with a slash", schedule(scheduleArgs{name: "ghr/refresh"}), attrError("name", "must be 1-64 characters")},
		{"function not an arn", schedule(scheduleArgs{fn: "ghr-refresh"}), attrError("function_arn", "must be a Lambda function ARN")},
		{"function arn with shell", schedule(scheduleArgs{fn: fn + ";id"}), attrError("function_arn", "must be a Lambda function ARN")},
		{"payload an array", schedule(scheduleArgs{payload: `"[]"`}), `payload`},
		{"payload not json", schedule(scheduleArgs{payload: `"runId=1"`}), `payload`},
		{"payload a number", schedule(scheduleArgs{payload: `"42"`}), `payload`},
		{"description of 513", schedule(scheduleArgs{description: strings.Repeat("d", 513)}), attrError("description", "string length must be at most 512")},
		{"timezone unknown", schedule(scheduleArgs{timezone: "Mars/Olympus"}), `timezone`},
		{"timezone with a path", schedule(scheduleArgs{timezone: "../../etc/passwd"}), `timezone`},
		{"enabled not a bool", strings.Replace(schedule(scheduleArgs{}), "schedule_expression =", "enabled = \"maybe\"\n  schedule_expression =", 1), typeError("enabled")},
		{"expression with shell", schedule(scheduleArgs{expr: "rate(5 minutes); rm -rf /"}), `schedule_expression`},
		{"expression cron of five fields", schedule(scheduleArgs{expr: "cron(*/5 * * * *)"}), `schedule_expression`},
	})
}

func TestAccPool_badInput(t *testing.T) {
	f := newPoolFixture(t)
	set := func(attr, value string) string {
		cfg := f.config("")
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(attr) + ` +=.*$`)
		if re.MatchString(cfg) {
			return re.ReplaceAllLiteralString(cfg, "  "+attr+" = "+value)
		}
		return f.config(attr + " = " + value)
	}
	// unknownScript sets agent_path beside a pre-runner script known only
	// at apply (timestamp() is unknown at plan).
	unknownScript := func(agentPath string) string {
		return f.config("agent_path = " + agentPath + "\npre_runner_script = \"#!/bin/sh\\n# ${timestamp()}\\n\"")
	}
	owner := "must be an organization (acme) or a repository (acme/api)"
	runBadAttrs(t, []badAttr{
		{"name with a hash", strings.Replace(f.config(""), `name               = "linux"`, `name = "linux#gpu"`, 1), attrError("name", "must be 1-64 letters, digits, '-' or '_'")},
		{"name with a space", strings.Replace(f.config(""), `name               = "linux"`, `name = "linux gpu"`, 1), attrError("name", "must be 1-64 letters")},
		{"name with a comma", strings.Replace(f.config(""), `name               = "linux"`, `name = "linux,gpu"`, 1), attrError("name", "must be 1-64 letters")},
		{"name a number list", strings.Replace(f.config(""), `name               = "linux"`, `name = [1]`, 1), typeError("name")},
		{"table wildcard", set("table", `"***"`), attrError("table", "must be 3-255 characters of A-Z a-z 0-9 _ . -")},
		{"queue name for url", set("queue_url", `"linux"`), attrError("queue_url", "must be the queue URL")},
		{"owner with a comma", set("owner", `"acme,evil"`), attrError("owner", owner)},
		{"owner dot-dot repo", set("owner", `"acme/.."`), attrError("owner", owner)},
		{"owner dot repo", set("owner", `"acme/."`), attrError("owner", owner)},
		{"owner empty repo", set("owner", `"acme/"`), attrError("owner", owner)},
		{"owner trailing hyphen", set("owner", `"acme-"`), attrError("owner", owner)},
		{"owner double hyphen", set("owner", `"ac--me"`), attrError("owner", owner)},
		{"owner of 40", set("owner", fmt.Sprintf("%q", strings.Repeat("a", 40))), attrError("owner", owner)},
		{"owner with shell", set("owner", `"acme/$(id)"`), attrError("owner", owner)},
		{"image not an ami", set("image_id", `"ami-x; rm"`), attrError("image_id", "must be an AMI id")},
		{"types empty", set("instance_types", `[]`), attrError("instance_types", "list must contain at least 1")},
		{"types repeated", set("instance_types", `["c7i.large", "c7i.large"]`), attrError("instance_types", "duplicate")},
		{"type with a comma", set("instance_types", `["c7i.large,m7i.large"]`), attrError("instance_types", "must be an instance type")},
		{"type a glob", set("instance_types", `["c7i.*"]`), attrError("instance_types", "must be an instance type")},
		{"types a string", set("instance_types", `"c7i.large"`), typeError("instance_types")},
		{"subnet with a space", set("subnet_ids", `["subnet-0123 4567"]`), attrError("subnet_ids", "must be a subnet id")},
		{"security group name", set("security_group_ids", `["default"]`), attrError("security_group_ids", "must be a security group id")},
		{"usage class case", set("usage_class", `"SPOT"`), attrError("usage_class", "value must be one of")},
		{"fallback not a bool", set("on_demand_fallback", `"yes please"`), typeError("on_demand_fallback")},
		{"max instances negative", set("max_instances", `-1`), attrError("max_instances", "between 1 and 10000")},
		{"max instances huge", set("max_instances", `10001`), attrError("max_instances", "between 1 and 10000")},
		{"max instances fractional", set("max_instances", `2.5`), `max_instances`},
		{"root volume small", set("root_volume_size", `7`), attrError("root_volume_size", "between 8 and 16384")},
		{"root volume type", set("root_volume_type", `"st1"`), attrError("root_volume_type", "value must be one of")},
		{"agent path with a quote", set("agent_path", `"/usr/bin/ghr'agent"`), attrError("agent_path", templates.AgentPathRule)},
		{"agent path with a space", set("agent_path", `"/usr/bin/ghr agent"`), attrError("agent_path", templates.AgentPathRule)},
		// The user data's rule is agent_path's own (issue 39, item 6): with a
		// script not known until apply the plan renders no user data, and
		// each of these passed plan, then failed at apply.
		{"agent path with a colon", unknownScript(`"/opt/ghr:agent"`), attrError("agent_path", templates.AgentPathRule)},
		{"agent path with a dollar", unknownScript(`"/opt/$${HOME}/agent"`), attrError("agent_path", templates.AgentPathRule)},
		{"agent path a folder", unknownScript(`"/opt/ghrunner/"`), attrError("agent_path", templates.AgentPathRule)},
		{"agent path with a semicolon", unknownScript(`"/opt/agent;id"`), attrError("agent_path", templates.AgentPathRule)},
		{"endpoint not http", set("agent_endpoint", `"ftp://10.0.0.1"`), attrError("agent_endpoint", "must be an http(s) URL")},
		{"endpoint with a newline", set("agent_endpoint", `"http://10.0.0.1\nrm -rf /"`), attrError("agent_endpoint", "must be an http(s) URL")},
		{"endpoints of an unknown service", set("agent_endpoints", `{ sqs = "https://vpce-1.sqs.eu-west-1.vpce.amazonaws.com" }`), attrError("agent_endpoints", "value must be one of")},
		{"endpoints not http", set("agent_endpoints", `{ s3 = "s3://bucket" }`), attrError("agent_endpoints", "must be an http(s) URL")},
		// The proxy's rules are agent/config's (issue 40 item 6).
		{"proxy with credentials", set("proxy", `{ url = "http://ci:hunter2@proxy.internal:3128" }`), attrError("proxy.url", "no user:password@")},
		{"proxy a socks one", set("proxy", `{ url = "socks5://proxy.internal:1080" }`), attrError("proxy.url", "a scheme of http or https")},
		{"proxy without a host", set("proxy", `{ url = "http://:3128" }`), attrError("proxy.url", "must be http://host[:port]")},
		{"proxy no_proxy empty", set("proxy", `{ url = "http://proxy.internal:3128", no_proxy = [] }`), attrError("proxy.no_proxy", "list must contain at least 1")},
		{"proxy no_proxy with a comma", set("proxy", `{ url = "http://proxy.internal:3128", no_proxy = ["a.example,b.example"] }`), attrError("proxy.no_proxy", "no spaces, commas or quotes")},
		{"runner user root shell", set("runner_user", `"root;id"`), attrError("runner_user", "must be a Linux user name")},
		{"runner user upper case", set("runner_user", `"Runner"`), attrError("runner_user", "must be a Linux user name")},
		{"tarball url a file", set("runner_tarball_url", `"file:///etc/passwd"`) + "", attrError("runner_tarball_url", "must be an http(s) URL")},
		{"tarball sha upper case", set("runner_tarball_sha256", fmt.Sprintf("%q", strings.Repeat("A", 64))), attrError("runner_tarball_sha256", "must be 64 lowercase hex digits")},
		{"pre-runner CRLF interpreter", set("pre_runner_script", `"#!/bin/bash\r\necho hi\n"`), `must start with an interpreter line`},
		{"pre-runner NUL before the interpreter", set("pre_runner_script", `"\u0000#!/bin/bash\n"`), `must start with an interpreter line`},
		{"cleanup without interpreter", set("cleanup_script", `"rm -rf /tmp/x"`), `must start with an interpreter line`},
		{"idle count negative", set("idle_windows", `[{ cron = "* * * * *", idle_count = -1 }]`), `idle_count(.|\n)*at least 0`},
		{"eviction strategy", set("idle_windows", `[{ cron = "* * * * *", idle_count = 1, eviction_strategy = "random" }]`), `eviction_strategy(.|\n)*value must be one of`},
		{"cron with shell", set("idle_windows", `[{ cron = "* * * * *; rm -rf /", idle_count = 1 }]`), `not a 5-field cron`},
		{"time zone a path", set("idle_windows", `[{ cron = "* * * * *", time_zone = "../../etc/passwd", idle_count = 1 }]`), `not an IANA time zone`},
		{"max uses zero", set("timings", `{ max_uses = 0 }`), attrError("timings.max_uses", "at least 1")},
		{"max runtime short", set("timings", `{ max_runtime_seconds = 59 }`), attrError("timings.max_runtime_seconds", "at least 60")},
		{"idle ttl short", set("timings", `{ idle_ttl_seconds = 59 }`), attrError("timings.idle_ttl_seconds", "at least 60")},
		// Issue 39 item 10: the control loop's timings are derived
		// (state.DeriveTimings), not settable.
		{"heartbeat an internal", set("heartbeat_interval_seconds", `1`), `An argument named "heartbeat_interval_seconds" is not expected here`},
		{"tags a list", set("tags", `["a"]`), typeError("tags")},
		// A scale set's name is a runs-on label (state.ScaleSetNamePattern).
		{"scale set name with a comma", set("scale_set", `{ name = "linux,gpu" }`), attrError("scale_set.name", state.ScaleSetNameRule)},
		{"scale set name with a space", set("scale_set", `{ name = "linux gpu" }`), attrError("scale_set.name", state.ScaleSetNameRule)},
		{"scale set name from a hyphen", set("scale_set", `{ name = "-linux" }`), attrError("scale_set.name", state.ScaleSetNameRule)},
		{"scale set name empty", set("scale_set", `{ name = "" }`), attrError("scale_set.name", state.ScaleSetNameRule)},
		{"scale set name of 46", set("scale_set", fmt.Sprintf("{ name = %q }", strings.Repeat("s", 46))), attrError("scale_set.name", state.ScaleSetNameRule)},
		{"scale set name with shell", set("scale_set", `{ name = "linux;$(id)" }`), attrError("scale_set.name", state.ScaleSetNameRule)},
		{"scale set without a name", set("scale_set", `{ max_runners = 2 }`), `(?i)attribute "name" is required`},
		{"scale set runners zero", set("scale_set", `{ name = "linux", max_runners = 0 }`), attrError("scale_set.max_runners", "value must be between 1 and 10000")},
		{"scale set runners over max instances", f.config("max_instances = 5\nscale_set = { name = \"linux\", max_runners = 6 }"),
			attrError("scale_set", "max_runners (6) must be at most max_instances (5)")},
		{"scale set runners over the default max instances", set("scale_set", `{ name = "linux", max_runners = 21 }`),
			attrError("scale_set", "max_runners (21) must be at most max_instances (20)")},
		{"scale set with token registration", f.config("registration = \"token\"\nscale_set = { name = \"linux\" }"),
			attrError("registration", `scale_set is set and registration is "token": a scale set's runners are just-in-time runners`)},
	})
}

func TestAccUserData_badInput(t *testing.T) {
	ud := func(attrs string) string {
		return providerConfig() + "data \"ghrunner_user_data\" \"x\" {\n  table = \"ghr-state\"\n  agent_path = \"/usr/local/bin/ghrunner-agent\"\n" + attrs + "\n}\n"
	}
	runBadAttrs(t, []badAttr{
		{"table with a space", strings.Replace(ud(""), `"ghr-state"`, `"ghr state"`, 1), `agent\.table:`},
		{"table a list", strings.Replace(ud(""), `"ghr-state"`, `["ghr-state"]`, 1), typeError("table")},
		{"agent path with a quote", strings.Replace(ud(""), `"/usr/local/bin/ghrunner-agent"`, `"/usr/local/bin/ghr'agent"`, 1), `agent_path: .* must be an absolute file path`},
		{"both agent sources", ud(`agent_url = "https://b.s3.eu-west-1.amazonaws.com/agent"`), `agent_path, agent_url: set exactly one`},
		{"runner user with shell", ud(`runner_user = "ghr;id"`), `runner_user: .* must be a Linux user name`},
		{"pre-runner without interpreter", ud(`pre_runner_script = "echo hi"`), `pre_runner_script: must start with an interpreter line`},
		{"cleanup with CRLF interpreter", ud(`cleanup_script = "#!/bin/sh\r\nrm -rf /tmp/x"`), `cleanup_script: must start with an interpreter line`},
		{"heartbeat not a duration", ud(`heartbeat_interval = "15 seconds"`), `heartbeat_interval:`},
		{"heartbeat negative", ud(`heartbeat_interval = "-15s"`), `heartbeatInterval: must be a positive duration`},
		{"tarball url a file", ud("runner_tarball_url = \"file:///etc/passwd\"\nrunner_tarball_sha256 = \"" + strings.Repeat("a", 64) + "\""), `runnerTarballUrl: .* must be an http\(s\) URL`},
		{"runner version not pinned", ud(`runner_version = "2.300.0"`), `runner_version[\s\S]*2\.300\.0`},
		{"architecture unknown", ud("runner_version = \"2.336.0\"\narchitecture = \"x86\""), `architecture: "x86" is not amd64 or arm64`},
		{"instance role id not a role id", ud(`instance_role_id = "AROA:i-1"`), `roleId: "AROA:i-1" must be an IAM role id`},
		{"oversized script", ud(fmt.Sprintf("pre_runner_script = %q", "#!/bin/bash\n"+strings.Repeat("echo 0123456789abcdef\n", 700))), `over EC2's limit of 16384`},
	})
}

// hostileScript is every way a script could try to end or escape the user
// data around it: quotes of both kinds, heredoc terminators alone on a line
// (EOF, 'EOF', the unit's), command and parameter substitutions, backticks,
// a line that looks like the user data's own config line, a CRLF line,
// non-ASCII, a NUL byte and no final newline.
const hostileScript = "#!/bin/bash\n" +
	"echo \"it's $(whoami) `id` ${HOME}\" '\"' '\\''\n" +
	"EOF\n'EOF'\n\"EOF\"\nEOT\nUNIT\ncat <<EOF\nEOF\n" +
	"put \"$R/etc/ghrunner/agent.json\" 0600 'e30='\n" +
	"printf '%s\\n' \"ü ✓\"\r\n" +
	"nul:\x00:end\n" +
	"exit 0"

// TestAccUserData_hostileScripts: scripts that must be accepted — quotes,
// EOF lines, $(...), a NUL byte — render, travel only as base64 and come
// back from templates.Parse byte-exact.
func TestAccUserData_hostileScripts(t *testing.T) {
	hcl := func(s string) string {
		// An HCL string: escape what HCL reads specially (${ and %{ too).
		q := fmt.Sprintf("%q", s)
		q = strings.ReplaceAll(q, `\x00`, `\u0000`)
		q = strings.ReplaceAll(q, "${", "$${")
		return strings.ReplaceAll(q, "%{", "%%{")
	}
	cleanup := "#!/bin/sh\n# EOF\nrm -rf \"/tmp/$(printf '%s' \"x'y\")\"\nEOF\n"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config: providerConfig() + fmt.Sprintf(`
data "ghrunner_user_data" "x" {
  table             = "ghr-state"
  agent_path        = "/usr/local/bin/ghrunner-agent"
  pre_runner_script = %s
  cleanup_script    = %s
}`, hcl(hostileScript), hcl(cleanup)),
			Check: func(s *terraform.State) error {
				rendered := s.RootModule().Resources["data.ghrunner_user_data.x"].Primary.Attributes["rendered"]
				u, err := templates.Parse([]byte(rendered))
				if err != nil {
					return err
				}
				if u.PreRunnerScript != hostileScript {
					return fmt.Errorf("pre_runner_script came back as %q", u.PreRunnerScript)
				}
				if u.CleanupScript != cleanup {
					return fmt.Errorf("cleanup_script came back as %q", u.CleanupScript)
				}
				for _, s := range []string{"whoami", "${HOME}", "nul:", "x'y"} {
					if strings.Contains(rendered, s) {
						return fmt.Errorf("%q appears in the user data in clear", s)
					}
				}
				again, err := templates.Render(u)
				if err != nil || string(again) != rendered {
					return fmt.Errorf("Render(Parse(rendered)) differs: %v", err)
				}
				return nil
			},
		}},
	})
}
