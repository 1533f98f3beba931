package main

import (
	"fmt"
	"os"
	"strings"
)

// The command line of config.sh and run.sh, parsed as the real runner's
// CommandLineParser parses it: the options each command knows, arguments
// from ACTIONS_RUNNER_INPUT_<NAME> variables, and a missing required one
// failing as the unattended prompt does.

var knownOptions = map[string][]string{
	"configure": {"unattended", "replace", "no-default-labels", "ephemeral", "disableupdate", "runasservice", "generateserviceconfig",
		"url", "token", "pat", "name", "labels", "runnergroup", "work", "auth", "monitorsocketaddress", "username", "windowslogonaccount", "windowslogonpassword"},
	"remove": {"token", "pat", "local"},
	"run":    {"once", "startuptype", "jitconfig"},
}

// command is a parsed command line: "--name value" is an argument, a
// "--name" followed by another "--name" (or nothing) a flag, names compared
// without regard to case, the first value winning; values starting with "-"
// are ignored — all as the runner's CommandLineParser does.
type command struct {
	name  string
	args  map[string]string
	flags map[string]bool
	env   map[string]string // ACTIONS_RUNNER_INPUT_<NAME>
}

func parse(name string, argv []string) command {
	c := command{name: name, args: map[string]string{}, flags: map[string]bool{}, env: map[string]string{}}
	scope := ""
	for _, a := range argv {
		switch {
		case strings.HasPrefix(a, "--") && len(a) > 2:
			if scope != "" {
				c.flags[scope] = true
			}
			scope = strings.ToLower(a[2:])
		case !strings.HasPrefix(a, "-"):
			if scope != "" {
				if _, dup := c.args[scope]; !dup {
					c.args[scope] = a
				}
				scope = ""
			}
		}
	}
	if scope != "" {
		c.flags[scope] = true
	}
	var unknown []string
	for n := range c.args {
		if !known(name, n) {
			unknown = append(unknown, n)
		}
	}
	for n := range c.flags {
		if !known(name, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(os.Stderr, "Unrecognized command-line input arguments for command %s: '%s'. For usage refer to: .\\config.cmd --help or ./config.sh --help\n", name, strings.Join(unknown, ", "))
	}
	// Arguments passed in the environment, which is then cleared of them
	// (so that nothing the runner starts inherits a token).
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if rest, ok := cutPrefixFold(k, "ACTIONS_RUNNER_INPUT_"); ok {
			if v = strings.TrimSpace(v); v != "" {
				c.env[strings.ToLower(rest)] = v
			}
			os.Unsetenv(k)
		}
	}
	return c
}

func known(cmd, name string) bool {
	for _, n := range knownOptions[cmd] {
		if n == name {
			return true
		}
	}
	return false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func (c command) arg(name string) string {
	if v := c.args[name]; v != "" {
		return v
	}
	return c.env[name]
}

func (c command) flag(name string) bool {
	return c.flags[name] || strings.EqualFold(c.env[name], "true")
}

// required mirrors the runner's unattended prompt: a missing value ends
// the configuration.
func (c command) required(name string) (string, error) {
	if v := c.arg(name); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("Invalid configuration provided for %s. Terminating unattended configuration.", name)
}
