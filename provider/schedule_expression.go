package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones resolve the same on every machine that runs the provider

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// Schedule expressions: EventBridge Scheduler accepts rate(), cron() and
// at(). They are checked at plan time, with messages that show a valid
// example, rather than by CreateSchedule at apply.

const scheduleExamples = "for example rate(5 minutes), cron(0/5 * * * ? *) or at(2030-01-31T09:00:00)"

// checkScheduleExpression says what is wrong with expr, or nil.
func checkScheduleExpression(expr string) error {
	inner := func(prefix string) (string, bool) {
		if strings.HasPrefix(expr, prefix+"(") && strings.HasSuffix(expr, ")") {
			return expr[len(prefix)+1 : len(expr)-1], true
		}
		return "", false
	}
	if s, ok := inner("rate"); ok {
		return scheduleCheckRate(s)
	}
	if s, ok := inner("cron"); ok {
		return scheduleCheckCron(s)
	}
	if s, ok := inner("at"); ok {
		if _, err := time.Parse("2006-01-02T15:04:05", strings.TrimSpace(s)); err != nil {
			return fmt.Errorf("at() takes a date and time yyyy-mm-ddThh:mm:ss (read in timezone), got %q; for example at(2030-01-31T09:00:00)", s)
		}
		return nil
	}
	return fmt.Errorf("%q is not a rate(), cron() or at() expression; %s", expr, scheduleExamples)
}

func scheduleCheckRate(s string) error {
	f := strings.Fields(s)
	if len(f) != 2 {
		return fmt.Errorf("rate() takes a number and a unit, got %q; for example rate(5 minutes) or rate(1 hour)", s)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 || strings.HasPrefix(f[0], "+") {
		return fmt.Errorf("rate() needs a whole number of at least 1, got %q; for example rate(5 minutes)", f[0])
	}
	unit := f[1]
	switch unit {
	case "minute", "hour", "day":
		if n != 1 {
			return fmt.Errorf("rate(%d %s): a value other than 1 takes the plural unit, e.g. rate(%d %ss)", n, unit, n, unit)
		}
	case "minutes", "hours", "days":
		if n == 1 {
			return fmt.Errorf("rate(1 %s): the value 1 takes the singular unit, e.g. rate(1 %s)", unit, strings.TrimSuffix(unit, "s"))
		}
	default:
		return fmt.Errorf("rate() unit %q is not one of minute, minutes, hour, hours, day, days; for example rate(5 minutes) or rate(1 day)", unit)
	}
	return nil
}

type scheduleCronField struct {
	name     string
	min, max int
	names    []string // names of min, min+1, … (months, weekdays)
	question bool     // day fields: ? allowed
	dom, dow bool
}

var (
	scheduleCronFields = []scheduleCronField{
		{name: "minutes", min: 0, max: 59},
		{name: "hours", min: 0, max: 23},
		{name: "day-of-month", min: 1, max: 31, question: true, dom: true},
		{name: "month", min: 1, max: 12, names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
		{name: "day-of-week", min: 1, max: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}, question: true, dow: true},
		{name: "year", min: 1970, max: 2199},
	}
	scheduleCronWeekdayRE = regexp.MustCompile(`^(\d+)W$`)
	scheduleCronLastRE    = regexp.MustCompile(`^(\w+)L$`)
	scheduleCronNthRE     = regexp.MustCompile(`^(\w+)#(\d+)$`)
)

func scheduleCheckCron(s string) error {
	f := strings.Fields(s)
	if len(f) != 6 {
		return fmt.Errorf("cron() takes 6 fields (minutes hours day-of-month month day-of-week year), got %d in %q; "+
			"unlike Unix cron it has a year and needs ? in day-of-month or day-of-week, for example cron(0/5 * * * ? *) or cron(0 8 ? * MON-FRI *)", len(f), s)
	}
	for i, cf := range scheduleCronFields {
		if err := cf.check(f[i]); err != nil {
			return fmt.Errorf("cron(%s): %w", s, err)
		}
	}
	dom, dow := f[2] == "?", f[4] == "?"
	switch {
	case dom && dow:
		return fmt.Errorf("cron(%s): day-of-month and day-of-week are both ?; set one of them, for example cron(0 12 * * ? *) (every day) or cron(0 12 ? * MON *) (Mondays)", s)
	case !dom && !dow:
		return fmt.Errorf("cron(%s): exactly one of day-of-month (3rd field) and day-of-week (5th field) must be ?, for example cron(0 12 * * ? *) (every day) or cron(0 12 ? * MON *) (Mondays)", s)
	}
	return nil
}

func (cf scheduleCronField) check(s string) error {
	if s == "?" {
		if !cf.question {
			return fmt.Errorf("? is allowed only in day-of-month or day-of-week, not in %s", cf.name)
		}
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		if err := cf.checkPart(part); err != nil {
			return fmt.Errorf("%s field %q: %w", cf.name, s, err)
		}
	}
	return nil
}

func (cf scheduleCronField) checkPart(p string) error {
	switch {
	case p == "":
		return errors.New("empty list entry")
	case p == "?":
		return errors.New("? must stand alone")
	case cf.dom && (p == "L" || p == "LW"):
		return nil
	case cf.dom && scheduleCronWeekdayRE.MatchString(p):
		return cf.checkValue(scheduleCronWeekdayRE.FindStringSubmatch(p)[1])
	case cf.dow && p == "L":
		return nil
	case cf.dow && scheduleCronLastRE.MatchString(p):
		return cf.checkValue(scheduleCronLastRE.FindStringSubmatch(p)[1])
	case cf.dow && scheduleCronNthRE.MatchString(p):
		m := scheduleCronNthRE.FindStringSubmatch(p)
		if k, _ := strconv.Atoi(m[2]); k < 1 || k > 5 {
			return fmt.Errorf("the week number after # must be 1-5, got %s", m[2])
		}
		return cf.checkValue(m[1])
	}
	base, step, hasStep := strings.Cut(p, "/")
	if hasStep {
		if n, err := strconv.Atoi(step); err != nil || n < 1 {
			return fmt.Errorf("the increment after / must be a whole number of at least 1, got %q", step)
		}
	}
	if base == "*" {
		return nil
	}
	lo, hi, isRange := strings.Cut(base, "-")
	if err := cf.checkValue(lo); err != nil {
		return err
	}
	if isRange {
		return cf.checkValue(hi)
	}
	return nil
}

func (cf scheduleCronField) checkValue(v string) error {
	for _, n := range cf.names {
		if strings.EqualFold(v, n) {
			return nil
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < cf.min || n > cf.max || strings.HasPrefix(v, "+") {
		allowed := fmt.Sprintf("%d-%d", cf.min, cf.max)
		if cf.names != nil {
			allowed += " or " + cf.names[0] + "-" + cf.names[len(cf.names)-1]
		}
		return fmt.Errorf("%q is not a valid %s value (%s)", v, cf.name, allowed)
	}
	return nil
}

type scheduleExpressionValidator struct{}

func (scheduleExpressionValidator) Description(context.Context) string {
	return "must be an EventBridge Scheduler rate(), cron() or at() expression"
}

func (v scheduleExpressionValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (scheduleExpressionValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := checkScheduleExpression(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid schedule expression", err.Error())
	}
}

// scheduleTimezoneValidator checks the time zone cron() and at() are read in.
type scheduleTimezoneValidator struct{}

func (scheduleTimezoneValidator) Description(context.Context) string {
	return "must be an IANA time zone name such as Europe/Berlin"
}

func (v scheduleTimezoneValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (scheduleTimezoneValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	tz := req.ConfigValue.ValueString()
	// LoadLocation also takes "" and "Local", which mean nothing to AWS.
	if _, err := time.LoadLocation(tz); err != nil || tz == "" || tz == "Local" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid time zone",
			fmt.Sprintf("%q is not an IANA time zone name; for example UTC, Europe/Berlin or America/New_York", tz))
	}
}
