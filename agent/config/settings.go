package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// How a setting is set besides the file: every field of Config is a
// setting named by its JSON name; each is settable from the environment
// (GHRUNNER_<NAME>, EnvName) and as a flag (-<name>), which win over the
// file in that order, except the FileOnly ones. The setters are derived
// from Config itself, so a field added to it is settable all three ways
// without a list to keep in step.

// FileOnly are the settings only the configuration file sets: fault
// injection and test fixtures. A real instance leaves them at their
// defaults; tests write them in the file. No flag or environment variable
// of the shipped agent touches them.
var FileOnly = []string{
	"imdsEndpoint",  // the instance metadata service (tests: a local fake)
	"clockOffset",   // shifts the agent's clock (fault injection)
	"osRelease",     // the distribution's os-release (tests: another file)
	"jitRemovedMin", // GitHub's idle removal, shortened for tests
	"bootIdFile",    // names the boot (tests: one per simulated boot)
}

// setting is how a setting is set from text, and that text's form.
type setting struct {
	set  func(string) error
	form string // for the flag's usage
}

// fields maps the JSON name of every setting but the FileOnly ones to a
// setter from text: strings as they are, booleans as strconv.ParseBool,
// durations as time.ParseDuration, maps as a JSON object.
func (c *Config) fields() map[string]setting {
	out := map[string]setting{}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || slices.Contains(FileOnly, name) {
			continue
		}
		out[name] = setter(v.Field(i))
	}
	return out
}

// setter sets field from text; it panics for a kind of field no setting
// has (a field of a new kind must be given its text form here).
func setter(field reflect.Value) setting {
	switch p := field.Addr().Interface().(type) {
	case *string:
		return setting{func(s string) error { *p = s; return nil }, "text"}
	case *bool:
		return setting{func(s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("want true or false: %w", err)
			}
			*p = b
			return nil
		}, "true or false"}
	case *Duration:
		return setting{func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return err
			}
			p.Duration = d
			return nil
		}, "a duration such as 15s"}
	case *map[string]string:
		return setting{func(s string) error {
			var m map[string]string
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				return fmt.Errorf("want a JSON object of strings: %w", err)
			}
			*p = m
			return nil
		}, `a JSON object such as {"dynamodb":"https://…"}`}
	case **Proxy:
		return setting{func(s string) error {
			var px Proxy
			if err := json.Unmarshal([]byte(s), &px); err != nil {
				return fmt.Errorf(`want a JSON object such as {"url":"http://proxy:3128","noProxy":[".internal"]}: %w`, err)
			}
			*p = &px
			return nil
		}, `a JSON object such as {"url":"http://proxy:3128","noProxy":[".internal"]}`}
	}
	panic(fmt.Sprintf("config: no text form for a setting of type %s", field.Type()))
}

// EnvName is the environment variable of a field: GHRUNNER_ + the JSON name
// in upper snake case (runnerDir → GHRUNNER_RUNNER_DIR).
func EnvName(field string) string {
	var b strings.Builder
	b.WriteString("GHRUNNER_")
	for i, r := range field {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func (c *Config) applyEnv(lookup func(string) (string, bool)) error {
	// Said rather than ignored: whoever set it expects it to count.
	for _, name := range FileOnly {
		if _, ok := lookup(EnvName(name)); ok {
			return fmt.Errorf("%s: %s is set only in the configuration file (a test setting), not in the environment", EnvName(name), name)
		}
	}
	for name, f := range c.fields() {
		if v, ok := lookup(EnvName(name)); ok {
			if err := f.set(v); err != nil {
				return fmt.Errorf("%s: %w", EnvName(name), err)
			}
		}
	}
	return nil
}

// Flags adds one flag per setting to fs and returns the values given; apply
// them after Load with Apply, so flags win over the file and the environment.
func Flags(fs *flag.FlagSet) map[string]string {
	given := map[string]string{}
	fields := (&Config{}).fields()
	var names []string
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fs.Func(name, name+" of the config file, as "+fields[name].form+" (env "+EnvName(name)+")", func(v string) error {
			given[name] = v
			return nil
		})
	}
	return given
}

// Apply sets fields by their JSON names.
func (c *Config) Apply(values map[string]string) error {
	fields := c.fields()
	for name, v := range values {
		f, ok := fields[name]
		if !ok {
			return fmt.Errorf("%s: unknown setting", name)
		}
		if err := f.set(v); err != nil {
			return fmt.Errorf("-%s: %w", name, err)
		}
	}
	return nil
}
