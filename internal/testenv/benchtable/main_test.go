package main

import (
	"strings"
	"testing"
)

func TestParseAndTable(t *testing.T) {
	in := `goos: linux
BenchmarkScaleDown1000-2   	       1	9700000000 ns/op	         5.000 github-list-calls	      1000 peer-github-calls	         9.70 run-s
BenchmarkAgentIdle-2   	       1	 60.00 idle-reads/min	 240.0 peer-idle-reads/min
BenchmarkScaleDownRetire/10000-memlist-2   	       1	 1 ns/op	 120.3 run-s	 2.000 gather-s	 8000 terminated	 0 deferred
BenchmarkClaimRace-2   	       5	 1 ns/op	 0 arriving-missed	 5.000 peer-arriving-missed	 0 arriving-empty-receives	 0 peer-arriving-empty-receives
PASS`
	m, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if m["BenchmarkScaleDown1000"]["peer-github-calls"] != 1000 || m["BenchmarkAgentIdle"]["idle-reads/min"] != 60 {
		t.Fatalf("parsed %v", m)
	}
	rows := map[string]row{}
	for _, r := range table(m) {
		rows[r.what] = r
	}
	gh := rows["scale-down over 1,000 instances, 5 owners: GitHub calls (peer: one look-up per runner)"]
	if gh.ours != "5.00" || gh.peer != "1000" || gh.ratio != "200×" {
		t.Errorf("GitHub calls row: %+v", gh)
	}
	if r := rows["same over 10,000, EC2 listing from memory: time / of it reading; retired / deferred"]; r.ours != "120 / 2.00 s; 8000 / 0.00" {
		t.Errorf("scale-down over 10,000 row (a sub-benchmark): %+v", r)
	}
	if r := rows["agent idle: DynamoDB reads per minute (peer: a read every 0.25 s, measured)"]; r.ratio != "4.00×" {
		t.Errorf("reads row: %+v", r)
	}
	if r := rows["20 provisions while 20 instances are pooled: provisions that missed one (each a needless launch)"]; r.ratio != "ours 0" {
		t.Errorf("a ratio over our 0 must say so: %+v", r)
	}
	if got := (metrics{"B": {"a": 0, "b": 0}}).ratio(ref{"B", "a"}, ref{"B", "b"}); got != "=" {
		t.Errorf("0 / 0 = %q, want =", got)
	}
	if r := rows["Lambda bundle zip, arm64 / amd64"]; r.ours != "—" {
		t.Errorf("an unmeasured figure must print as —: %+v", r)
	}
	cs := metrics{"BenchmarkColdStart": {"init-s": 0.0313, "p50-cold-invoke-s": 0.032, "p50-warm-invoke-s": 0.00067}}
	for _, r := range table(cs) {
		if r.how == "ColdStart" && r.what != "Lambda bundle zip, arm64 / amd64" && r.ours != "31.3 ms; 32.0 / 0.67 ms" {
			t.Errorf("init row: %+v", r)
		}
	}
	reg := metrics{"BenchmarkRegistration": {"p50-jit-warm-1-s": 0.5, "p95-jit-warm-1-s": 0.9, "p50-token-warm-1-s": 1.5, "p95-token-warm-1-s": 2,
		"jit-rest-calls/workflow": 31.6, "token-rest-calls/workflow": 0}}
	rows = map[string]row{}
	for _, r := range table(reg) {
		rows[r.what] = r
	}
	if r := rows["sandbox: warm provision of 1 until its runner is online, p50 / p95 (peer: registration token and config.sh, our token pool, measured)"]; r.ours != "0.50 / 0.90 s" || r.peer != "1.50 / 2.00 s" || r.ratio != "3.00×" {
		t.Errorf("registration row: %+v", r)
	}
	if r := rows["GitHub REST API calls per workflow of 20 jobs on 10 warm runners, provision to release"]; r.ours != "31.6" || r.peer != "0.00" {
		t.Errorf("calls row: %+v", r)
	}
	if _, err := parse(strings.NewReader("BenchmarkX-2 1 abc ns/op")); err == nil {
		t.Error("a malformed value was accepted")
	}
}
