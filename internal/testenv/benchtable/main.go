// Command benchtable turns the output of `go test -bench` (the metrics the
// benchmarks report) into the table of BENCHMARKS.md: ours beside the peer
// design's cost for the same work, and their ratio. make bench runs it.
//
//	go test -run '^$' -bench . ./lambdas | go run ./internal/testenv/benchtable
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

const usage = `usage: go test -run '^$' -bench ... | go run ./internal/testenv/benchtable

Reads benchmark output on standard input and prints the table of
BENCHMARKS.md; a figure that was not measured prints as "—".
`

// metrics holds, per benchmark (without the -N suffix), each reported unit.
type metrics map[string]map[string]float64

func parse(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		if m[name] == nil {
			m[name] = map[string]float64{}
		}
		// f[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a number", f[0], f[i])
			}
			m[name][f[i+1]] = v
		}
	}
	return m, sc.Err()
}

// ref names one metric of one benchmark.
type ref struct{ bench, unit string }

func (m metrics) get(r ref) (float64, bool) {
	v, ok := m[r.bench][r.unit]
	return v, ok
}

// cell prints the metrics joined by " / ", each with its unit suffix.
func (m metrics) cell(suffix string, refs ...ref) string {
	parts := make([]string, 0, len(refs))
	for _, r := range refs {
		v, ok := m.get(r)
		if !ok {
			return "—"
		}
		parts = append(parts, num(v))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, " / ") + suffix
}

// ms is cell for figures reported in seconds that are better read in
// milliseconds.
func (m metrics) ms(refs ...ref) string {
	scaled := metrics{}
	for _, r := range refs {
		if v, ok := m.get(r); ok {
			if scaled[r.bench] == nil {
				scaled[r.bench] = map[string]float64{}
			}
			scaled[r.bench][r.unit] = v * 1000
		}
	}
	return scaled.cell(" ms", refs...)
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// ratio is peer / ours as "N×"; when ours is 0 and the peer's is not, it
// says so rather than divide by zero.
func (m metrics) ratio(peer, ours ref) string {
	p, ok1 := m.get(peer)
	o, ok2 := m.get(ours)
	switch {
	case !ok1 || !ok2:
		return "—"
	case o == 0 && p == 0:
		return "="
	case o == 0:
		return "ours 0"
	}
	return num(p/o) + "×"
}

type row struct {
	what, ours, peer, ratio, how string
}

func table(m metrics) []row {
	p, sd, ag, cs, cr := "BenchmarkProvision", "BenchmarkScaleDown1000", "BenchmarkAgentIdle", "BenchmarkColdStart", "BenchmarkClaimRace"
	sr := "BenchmarkScaleDownRetire"
	prov := func(n int, phase string) string {
		u := fmt.Sprintf("provision-%d-%s-s", n, phase)
		return m.cell(" s", ref{p, "p50-" + u}, ref{p, "p95-" + u})
	}
	rows := []row{}
	for _, n := range []int{1, 10, 50} {
		rows = append(rows, row{fmt.Sprintf("warm provision of %d (reused from the pool), p50 / p95", n), prov(n, "reused"), "—", "—", "Provision"})
	}
	for _, n := range []int{1, 10, 50} {
		rows = append(rows, row{fmt.Sprintf("cold provision of %d (created; local boot is a process start), p50 / p95", n), prov(n, "created"), "—", "—", "Provision"})
	}
	rows = append(rows,
		row{"release of 10, p50 / p95 (peer: 10 s signal polling, measured)",
			m.cell(" s", ref{p, "p50-release-10-s"}, ref{p, "p95-release-10-s"}),
			m.cell(" s", ref{p, "p50-peer-release-10-s"}, ref{p, "p95-peer-release-10-s"}),
			m.ratio(ref{p, "p50-peer-release-10-s"}, ref{p, "p50-release-10-s"}), "Provision"},
		row{"claim race: 32 provisions for 20 pooled instances, claims/s, higher is better (peer: SQS short polling)",
			m.cell("", ref{cr, "claims/s"}), m.cell("", ref{cr, "peer-claims/s"}),
			m.ratio(ref{cr, "peer-claims/s"}, ref{cr, "claims/s"}), "ClaimRace"},
		row{"claim race: ReceiveMessage calls per race",
			m.cell("", ref{cr, "pure-receives"}), m.cell("", ref{cr, "peer-pure-receives"}),
			m.ratio(ref{cr, "peer-pure-receives"}, ref{cr, "pure-receives"}), "ClaimRace"},
		row{"20 provisions while 20 instances are pooled: provisions that missed one (each a needless launch)",
			m.cell("", ref{cr, "arriving-missed"}), m.cell("", ref{cr, "peer-arriving-missed"}),
			m.ratio(ref{cr, "peer-arriving-missed"}, ref{cr, "arriving-missed"}), "ClaimRace"},
		row{"same: ReceiveMessage calls / empty receives",
			m.cell("", ref{cr, "arriving-receives"}, ref{cr, "arriving-empty-receives"}), m.cell("", ref{cr, "peer-arriving-receives"}, ref{cr, "peer-arriving-empty-receives"}),
			m.ratio(ref{cr, "peer-arriving-empty-receives"}, ref{cr, "arriving-empty-receives"}), "ClaimRace"},
		row{"conditional claims against moto, one at a time", m.cell(" claims/s", ref{"BenchmarkClaim", "claims/s"}), "—", "—", "Claim"},
		row{"scale-down over 1,000 instances, 5 owners: GitHub calls (peer: one look-up per runner)", m.cell("", ref{sd, "github-list-calls"}), m.cell("", ref{sd, "peer-github-calls"}),
			m.ratio(ref{sd, "peer-github-calls"}, ref{sd, "github-list-calls"}), "ScaleDown1000"},
		row{"scale-down over 1,000: time (peer: its look-ups alone, local fake GitHub)", m.cell(" s", ref{sd, "run-s"}), m.cell(" s", ref{sd, "peer-lookups-s"}), "—", "ScaleDown1000"},
		row{"scale-down over 1,000: EC2 DescribeInstances / DynamoDB BatchGetItem calls", m.cell("", ref{sd, "ec2-describe-calls"}, ref{sd, "ddb-batchget-calls"}), "—", "—", "ScaleDown1000"},
		row{"scale-down retiring 8 in 10 of 1,000 instances (300 s deadline, bundle): time / of it reading; retired", m.cell(" s", ref{sr + "/1000", "run-s"}, ref{sr + "/1000", "gather-s"}) + "; " + m.cell("", ref{sr + "/1000", "terminated"}), "—", "—", "ScaleDownRetire"},
		row{"same over 5,000 (about the most moto can list and do within 300 s): time / of it reading; retired / deferred", m.cell(" s", ref{sr + "/5000", "run-s"}, ref{sr + "/5000", "gather-s"}) + "; " + m.cell("", ref{sr + "/5000", "terminated"}, ref{sr + "/5000", "deferred"}), "—", "—", "ScaleDownRetire"},
		row{"same over 10,000, EC2 listing from memory: time / of it reading; retired / deferred", m.cell(" s", ref{sr + "/10000-memlist", "run-s"}, ref{sr + "/10000-memlist", "gather-s"}) + "; " + m.cell("", ref{sr + "/10000-memlist", "terminated"}, ref{sr + "/10000-memlist", "deferred"}), "—", "—", "ScaleDownRetire"},
		row{"agent idle: DynamoDB reads per minute (peer: a read every 0.25 s, measured)", m.cell("", ref{ag, "idle-reads/min"}), m.cell("", ref{ag, "peer-idle-reads/min"}),
			m.ratio(ref{ag, "peer-idle-reads/min"}, ref{ag, "idle-reads/min"}), "AgentIdle"},
		row{"agent idle: DynamoDB writes per minute (peer: heartbeat every 5 s, measured)", m.cell("", ref{ag, "idle-writes/min"}), m.cell("", ref{ag, "peer-idle-writes/min"}),
			m.ratio(ref{ag, "peer-idle-writes/min"}, ref{ag, "idle-writes/min"}), "AgentIdle"},
		row{"agent idle: CPU ms per minute", m.cell("", ref{ag, "idle-cpu-ms/min"}), m.cell("", ref{ag, "peer-idle-cpu-ms/min"}),
			m.ratio(ref{ag, "peer-idle-cpu-ms/min"}, ref{ag, "idle-cpu-ms/min"}), "AgentIdle"},
		row{"agent idle: RSS", m.cell(" KB", ref{ag, "idle-rss-KB"}), m.cell(" KB", ref{ag, "peer-idle-rss-KB"}),
			m.ratio(ref{ag, "peer-idle-rss-KB"}, ref{ag, "idle-rss-KB"}), "AgentIdle"},
		row{"agent assigned: DynamoDB reads / writes per minute, RSS", m.cell("", ref{ag, "assigned-reads/min"}, ref{ag, "assigned-writes/min"}) + ", " + m.cell(" KB", ref{ag, "assigned-rss-KB"}), "—", "—", "AgentIdle"},
		row{"Lambda bundle zip, arm64 / amd64", m.cell(" MB", ref{cs, "zip-MB-arm64"}, ref{cs, "zip-MB-amd64"}), "—", "—", "ColdStart"},
		row{"Lambda init (cold minus warm invoke, p50); cold / warm invoke", m.ms(ref{cs, "init-s"}) + "; " + m.ms(ref{cs, "p50-cold-invoke-s"}, ref{cs, "p50-warm-invoke-s"}), "—", "—", "ColdStart"},
	)
	rows = append(rows, registrationRows(m)...)
	const ss = "BenchmarkScaleSet"
	return append(rows,
		row{"sandbox, scale-set mode on a warm pool: a job queued at GitHub to running on a pooled instance, p50 / p95 (no invoking job)",
			m.cell(" s", ref{ss, "p50-queued-to-running-s"}, ref{ss, "p95-queued-to-running-s"}), "—", "—", "ScaleSet"},
		row{"same: a job's end to its instance clean, checked and claimable again, p50", m.cell(" s", ref{ss, "p50-done-to-ready-s"}), "—", "—", "ScaleSet"},
	)
}

// registrationRows compare just-in-time runners (ours) with registration
// tokens and config.sh (the peer design's registration; our token pool),
// measured in the sandbox in one run.
func registrationRows(m metrics) []row {
	const reg, how = "BenchmarkRegistration", "Registration"
	pq := func(mode, what string) string {
		return m.cell(" s", ref{reg, "p50-" + mode + "-" + what + "-s"}, ref{reg, "p95-" + mode + "-" + what + "-s"})
	}
	p50 := func(mode, what string) ref { return ref{reg, "p50-" + mode + "-" + what + "-s"} }
	split := func(mode string) string {
		return m.cell(" s", p50(mode, "warm-10-claim"), p50(mode, "warm-10-config"), p50(mode, "warm-10-runner-start"), p50(mode, "warm-10-signal"))
	}
	calls := func(mode, kind string) ref { return ref{reg, mode + "-" + kind + "-calls/workflow"} }
	return []row{
		{"sandbox: warm provision of 1 until its runner is online, p50 / p95 (peer: registration token and config.sh, our token pool, measured)",
			pq("jit", "warm-1"), pq("token", "warm-1"), m.ratio(p50("token", "warm-1"), p50("jit", "warm-1")), how},
		{"sandbox: warm provision of 10 until every runner is online, p50 / p95", pq("jit", "warm-10"), pq("token", "warm-10"),
			m.ratio(p50("token", "warm-10"), p50("jit", "warm-10")), how},
		{"same, the slowest instance: claim / configuration in its record / runner online / ready signal seen, p50", split("jit"), split("token"), "—", how},
		{"sandbox: a job's end to the next job on the same instance, p50 / p95 (token: the same runner takes it)", pq("jit", "gap-started"), pq("token", "gap-started"), "—", how},
		{"sandbox: a job's end to the instance's next just-in-time runner online, p50 / p95", pq("jit", "gap-online"), "—", "—", how},
		{"GitHub REST API calls per workflow of 20 jobs on 10 warm runners, provision to release", m.cell("", calls("jit", "rest")), m.cell("", calls("token", "rest")), "—", how},
		{"same: runners added or removed through config.sh's protocol", m.cell("", calls("jit", "configsh")), m.cell("", calls("token", "configsh")), "—", how},
	}
}

func main() {
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage); flag.PrintDefaults() }
	flag.Parse()
	m, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if len(m) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results on standard input")
		os.Exit(1)
	}
	fmt.Println("| what | ours | peer design | peer / ours | benchmark |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range table(m) {
		fmt.Printf("| %s | %s | %s | %s | `%s` |\n", r.what, r.ours, r.peer, r.ratio, r.how)
	}
}
