package state

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

const (
	kindPool = "pool"
	// poolsKey holds the set of pool names, so listing pools is one GetItem
	// and never a Scan of the instance records.
	poolsKey = "pools"
)

// Timings are a pool's leases and limits, in seconds. Zero means the default
// (DefaultTimings). A pool's user sets five of them (Lifecycle) and the
// provider derives the rest (DeriveTimings, derive.go); tests that write a
// pool config item themselves set them directly.
type Timings struct {
	CreatedTTL        int64 `dynamodbav:"createdTTL" json:"createdTTL,omitempty"`
	ClaimTTL          int64 `dynamodbav:"claimTTL" json:"claimTTL,omitempty"`
	MaxRuntime        int64 `dynamodbav:"maxRuntime" json:"maxRuntime,omitempty"`
	IdleTTL           int64 `dynamodbav:"idleTTL" json:"idleTTL,omitempty"`
	BootTime          int64 `dynamodbav:"bootTime" json:"bootTime,omitempty"`
	MinRunningTime    int64 `dynamodbav:"minRunningTime" json:"minRunningTime,omitempty"`
	HeartbeatInterval int64 `dynamodbav:"heartbeatInterval" json:"heartbeatInterval,omitempty"`
	StaleAfter        int64 `dynamodbav:"staleAfter" json:"staleAfter,omitempty"`
	MaxAge            int64 `dynamodbav:"maxAge" json:"maxAge,omitempty"`
	MaxUses           int   `dynamodbav:"maxUses" json:"maxUses,omitempty"`
	// ReleaseWait bounds release's wait for an agent's UD_REMOVE_REG_OK.
	ReleaseWait int64 `dynamodbav:"releaseWait" json:"releaseWait,omitempty"`
	// RuntimeCap is the longest one run may hold an instance: the agent
	// extends the running lease (maxRuntime at a time) while its runner is
	// alive, up to this long after the instance started running.
	RuntimeCap int64 `dynamodbav:"runtimeCap" json:"runtimeCap,omitempty"`
}

// DefaultTimings returns the timings a pool has where it sets none. Pools
// are Linux only (the provider refuses a Windows image).
func DefaultTimings() Timings {
	t := Timings{
		CreatedTTL: 600, ClaimTTL: 300, MaxRuntime: 3600, IdleTTL: 900, BootTime: 300,
		MinRunningTime: 300, HeartbeatInterval: 15, StaleAfter: 60, MaxAge: 86400, MaxUses: 50, ReleaseWait: 120,
		RuntimeCap: 6 * 3600, // GitHub's limit for one job; raise it for longer runs
	}
	return t
}

// WithDefaults fills the zero fields from DefaultTimings.
func (t Timings) WithDefaults() Timings {
	d := DefaultTimings()
	fill := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&t.CreatedTTL, d.CreatedTTL)
	fill(&t.ClaimTTL, d.ClaimTTL)
	fill(&t.MaxRuntime, d.MaxRuntime)
	fill(&t.IdleTTL, d.IdleTTL)
	fill(&t.BootTime, d.BootTime)
	fill(&t.MinRunningTime, d.MinRunningTime)
	fill(&t.HeartbeatInterval, d.HeartbeatInterval)
	fill(&t.StaleAfter, d.StaleAfter)
	fill(&t.MaxAge, d.MaxAge)
	fill(&t.ReleaseWait, d.ReleaseWait)
	fill(&t.RuntimeCap, d.RuntimeCap)
	if t.MaxUses == 0 {
		t.MaxUses = d.MaxUses
	}
	return t
}

// D converts one of the second counts to a time.Duration.
func D(seconds int64) time.Duration { return time.Duration(seconds) * time.Second }

// IdleWindow keeps IdleCount clean idle instances while its 5-field cron
// matches the current minute in TimeZone.
type IdleWindow struct {
	Cron             string `dynamodbav:"cron" json:"cron"`
	TimeZone         string `dynamodbav:"timeZone" json:"timeZone"`
	IdleCount        int    `dynamodbav:"idleCount" json:"idleCount"`
	EvictionStrategy string `dynamodbav:"evictionStrategy" json:"evictionStrategy"`
}

// RootVolume is a pool's root volume: its size and EBS type.
type RootVolume struct {
	GiB  int    `dynamodbav:"gib" json:"gib"`
	Type string `dynamodbav:"type" json:"type"`
}

// PoolConfig is a pool's configuration item (pk pool#<name>), written by the
// ghrunner_pool resource and read by the functions at run time.
type PoolConfig struct {
	Name                  string       `dynamodbav:"name" json:"name"`
	Owner                 string       `dynamodbav:"owner" json:"owner"`
	QueueURL              string       `dynamodbav:"queueUrl" json:"queueUrl"`
	LaunchTemplateID      string       `dynamodbav:"launchTemplateId" json:"launchTemplateId"`
	LaunchTemplateVersion string       `dynamodbav:"launchTemplateVersion" json:"launchTemplateVersion"`
	InstanceTypes         []string     `dynamodbav:"instanceTypes" json:"instanceTypes"`
	SubnetIDs             []string     `dynamodbav:"subnetIds" json:"subnetIds"`
	UsageClass            string       `dynamodbav:"usageClass" json:"usageClass"`
	OnDemandFallback      bool         `dynamodbav:"onDemandFallback" json:"onDemandFallback"`
	MaxInstances          int          `dynamodbav:"maxInstances" json:"maxInstances"`
	Timings               Timings      `dynamodbav:"timings" json:"timings"`
	IdleWindows           []IdleWindow `dynamodbav:"idleWindows" json:"idleWindows"`
	// RootVolume is the launch template's root volume: what the cost
	// report prices a pool's EBS by (nil on items written before it).
	RootVolume *RootVolume `dynamodbav:"rootVolume,omitempty" json:"rootVolume,omitempty"`
	// SubnetZones is the Availability Zone of each subnet (the provider
	// reads them): a launch names one subnet per AZ in a request. Empty
	// for a pool written before it was kept.
	SubnetZones map[string]string `dynamodbav:"subnetZones,omitempty" json:"subnetZones,omitempty"`
	// Tags go on everything a launch creates besides ghrunner's own ghr:
	// tags: the deployment's default tags and the pool's (cost allocation,
	// tag-enforcing SCPs).
	Tags map[string]string `dynamodbav:"tags,omitempty" json:"tags,omitempty"`
	// RunnerGroup is the organization's runner group the runners join;
	// empty: its default group.
	RunnerGroup string `dynamodbav:"runnerGroup,omitempty" json:"runnerGroup,omitempty"`
	// Registration is how runners are registered: RegistrationJIT (a
	// single-job configuration per job, minted by the control plane) or
	// RegistrationToken (config.sh with a registration token, also when
	// empty; for GitHub Enterprise Server versions without JIT).
	Registration string `dynamodbav:"registration,omitempty" json:"registration,omitempty"`
	// Draining is set by an operator (ghrunner drain): the pool takes no
	// new run and pools nothing; its idle instances are retired and the
	// runs it serves finish. The provider keeps it across applies.
	Draining bool `dynamodbav:"draining,omitempty" json:"draining,omitempty"`
	// MaxProvisionsPerRepository and MaxQueuedPerRepository bound what one
	// repository may hold of the provision function and of the pool's
	// capacity queue (fairshare.go); 0: no limit, as before pools had them.
	MaxProvisionsPerRepository int `dynamodbav:"maxProvisionsPerRepository,omitempty" json:"maxProvisionsPerRepository,omitempty"`
	MaxQueuedPerRepository     int `dynamodbav:"maxQueuedPerRepository,omitempty" json:"maxQueuedPerRepository,omitempty"`
	// ScaleSet, when set, makes the pool serve a runner scale set too:
	// the listener (lambdas/listener) holds its message session and
	// gives each job assigned to it a warm instance of the pool.
	ScaleSet *ScaleSetConfig `dynamodbav:"scaleSet,omitempty" json:"scaleSet,omitempty"`
	// Stopped, when set, keeps idle instances scale-down retires stopped
	// for reuse (stoppedtier.go); nil: off.
	Stopped *StoppedTier `dynamodbav:"stopped,omitempty" json:"stopped,omitempty"`
	// InstanceRoleID is the id (RoleId, AROA…) of the pool's instance role:
	// the first half of its instances' record keys (InstanceKey). Empty
	// for a pool written before keys carried the role.
	InstanceRoleID string `dynamodbav:"instanceRoleId,omitempty" json:"instanceRoleId,omitempty"`
	UpdatedAt      int64  `dynamodbav:"updatedAt" json:"updatedAt,omitempty"`
	// Runner is the actions/runner release the pool's instances install
	// (runnerversion.go); empty for a pool written before pools had one.
	Runner RunnerSpec `dynamodbav:"runner,omitempty" json:"runner,omitempty"`
	// LatestTarget is what refresh resolved "latest" to for this pool: an
	// attribute of the pool's item beside its configuration, so an apply
	// keeps it (never written by the provider).
	LatestTarget *runnerrelease.Target `dynamodbav:"-" json:"latestTarget,omitempty"`
}

// ScaleSetConfig is a pool's runner scale set: workflows name it in
// runs-on, with no job that invokes provision or release. The scale set
// joins the pool's runner group; its runners are just-in-time runners
// with updates disabled.
type ScaleSetConfig struct {
	// Name is the scale set's name at GitHub: the label jobs ask for.
	Name string `dynamodbav:"name" json:"name"`
	// MaxRunners bounds the runners the scale set has at once (and so
	// the instances it holds of the pool); 0: the pool's maxInstances.
	MaxRunners int `dynamodbav:"maxRunners,omitempty" json:"maxRunners,omitempty"`
}

// ScaleSetNamePattern is what ghrunner accepts as a scale set's name, the
// label a workflow's runs-on names: 1-45 letters, digits, '-', '_' or '.',
// starting with a letter or digit. GitHub documents that a scale set has
// one label, its name, which runs-on uses, and that names are unique
// within a runner group; labels are case-insensitive, and a comma
// separates labels (config.sh --labels), so none may hold one. It does not
// document a length or character set for the name itself: 45 is the limit
// ARC's gha-runner-scale-set chart puts on runnerScaleSetName (it becomes
// the name of Kubernetes objects), the strictest one a scale set name
// already meets in practice; the characters are those of a runner label
// that needs no quoting in YAML or a shell.
const ScaleSetNamePattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,44}$`

var scaleSetNameRE = regexp.MustCompile(ScaleSetNamePattern)

// ScaleSetNameRule says ScaleSetNamePattern in words, for errors.
const ScaleSetNameRule = "must be 1-45 letters, digits, '-', '_' or '.', starting with a letter or digit (a runs-on label; at most 45 like ARC's runnerScaleSetName)"

// validate checks the scale set of a pool of maxInstances whose runners
// are just-in-time runners or not (jit).
func (s ScaleSetConfig) validate(maxInstances int, jit bool) error {
	switch {
	case !scaleSetNameRE.MatchString(s.Name):
		return fmt.Errorf("scaleSet.name: %q %s", s.Name, ScaleSetNameRule)
	case s.MaxRunners < 0 || s.MaxRunners > maxInstances:
		return fmt.Errorf("scaleSet.maxRunners: must be 1 to the pool's maxInstances (%d), or 0 for maxInstances; got %d", maxInstances, s.MaxRunners)
	case !jit:
		return fmt.Errorf("scaleSet: a scale set's runners are just-in-time runners: registration must be %s", RegistrationJIT)
	}
	return nil
}

// RecordKey is the key of the record of the pool's instance instanceID.
func (p *PoolConfig) RecordKey(instanceID string) Key {
	return InstanceKey(p.InstanceRoleID, instanceID)
}

// How runners are registered.
const (
	RegistrationJIT   = "jit"
	RegistrationToken = "token"
)

// JIT says whether the pool's runners are just-in-time runners.
func (p *PoolConfig) JIT() bool { return p.Registration == RegistrationJIT }

// maxPoolTags leaves room, within EC2's 50 tags per resource, for the
// ghr: tags a launch adds.
const maxPoolTags = 40

// PoolNamePattern is what a pool's name may be. It is the rule's one home:
// PoolConfig, ghrunner_pool and ghrunner_monitoring (at plan) and provision
// (its payload's pool) check with it, and the module's variables.tf, which
// Terraform cannot have call Go, writes it out and a docscheck test keeps it
// equal to this.
const PoolNamePattern = `^[A-Za-z0-9_-]{1,64}$`

// PoolNameRule says PoolNamePattern in words, for errors.
const PoolNameRule = "must be 1-64 letters, digits, '-' or '_'"

// The usage classes a pool launches with, EC2's two purchasing options. The
// rule's one home: fleet.Spot and fleet.OnDemand are these, and PoolConfig,
// a pool message, provision and ghrunner_pool check with ValidUsageClass or
// UsageClasses.
const (
	UsageClassSpot     = "spot"
	UsageClassOnDemand = "on-demand"
)

// UsageClasses are the usage classes, spot first (the default).
var UsageClasses = []string{UsageClassSpot, UsageClassOnDemand}

// ValidUsageClass says whether c is a usage class.
func ValidUsageClass(c string) bool { return c == UsageClassSpot || c == UsageClassOnDemand }

var (
	poolNameRE     = regexp.MustCompile(PoolNamePattern)
	ownerRE        = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9._-]{1,100})?$`)
	instanceTypeRE = regexp.MustCompile(`^[a-z0-9-]+\.[a-z0-9-]+$`)
	cronParser     = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
)

// Validate reports the first invalid field, naming it and the rule.
func (p PoolConfig) Validate() error {
	switch {
	case !poolNameRE.MatchString(p.Name):
		return fmt.Errorf("name: %q %s", p.Name, PoolNameRule)
	case !ownerRE.MatchString(p.Owner):
		return fmt.Errorf("owner: %q must be an organization (acme) or a repository (acme/api)", p.Owner)
	case p.QueueURL == "":
		return fmt.Errorf("queueUrl: required")
	case p.LaunchTemplateID == "":
		return fmt.Errorf("launchTemplateId: required")
	case p.LaunchTemplateVersion == "":
		return fmt.Errorf("launchTemplateVersion: required")
	case len(p.InstanceTypes) == 0:
		return fmt.Errorf("instanceTypes: at least one instance type is required")
	case len(p.SubnetIDs) == 0:
		return fmt.Errorf("subnetIds: at least one subnet is required")
	case len(p.Tags) > maxPoolTags:
		return fmt.Errorf("tags: %d tags, at most %d (EC2 allows 50 per resource and ghrunner adds its own)", len(p.Tags), maxPoolTags)
	case !ValidUsageClass(p.UsageClass):
		return fmt.Errorf("usageClass: %q must be spot or on-demand", p.UsageClass)
	case p.MaxInstances < 1:
		return fmt.Errorf("maxInstances: must be at least 1, got %d", p.MaxInstances)
	case p.Registration != "" && p.Registration != RegistrationJIT && p.Registration != RegistrationToken:
		return fmt.Errorf("registration: %q must be %s or %s", p.Registration, RegistrationJIT, RegistrationToken)
	}
	if err := p.Runner.validate(); err != nil {
		return err
	}
	if p.ScaleSet != nil {
		if err := p.ScaleSet.validate(p.MaxInstances, p.JIT()); err != nil {
			return err
		}
	}
	if p.Stopped != nil {
		if err := p.Stopped.validate(p.UsageClass, p.OnDemandFallback); err != nil {
			return err
		}
	}
	if err := p.validateShare(); err != nil {
		return err
	}
	for i, t := range p.InstanceTypes {
		if !instanceTypeRE.MatchString(t) {
			return fmt.Errorf("instanceTypes[%d]: %q is not an instance type like c7i.large", i, t)
		}
	}
	if err := p.Timings.validate(); err != nil {
		return err
	}
	for i, w := range p.IdleWindows {
		if err := w.Validate(); err != nil {
			return fmt.Errorf("idleWindows[%d].%w", i, err)
		}
	}
	for k := range p.Tags {
		if strings.HasPrefix(k, "ghr:") || strings.HasPrefix(k, "aws:") {
			return fmt.Errorf("tags: %q: the ghr: and aws: prefixes are reserved", k)
		}
	}
	return nil
}

func (t Timings) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"createdTTL", t.CreatedTTL}, {"claimTTL", t.ClaimTTL}, {"maxRuntime", t.MaxRuntime}, {"idleTTL", t.IdleTTL},
		{"bootTime", t.BootTime}, {"minRunningTime", t.MinRunningTime}, {"heartbeatInterval", t.HeartbeatInterval},
		{"staleAfter", t.StaleAfter}, {"maxAge", t.MaxAge}, {"maxUses", int64(t.MaxUses)}, {"releaseWait", t.ReleaseWait},
		{"runtimeCap", t.RuntimeCap},
	} {
		if f.v < 0 {
			return fmt.Errorf("timings.%s: must be 0 (default) or positive, got %d", f.name, f.v)
		}
	}
	if t.RuntimeCap != 0 && t.MaxRuntime != 0 && t.RuntimeCap < t.MaxRuntime {
		return fmt.Errorf("timings.runtimeCap: must be at least maxRuntime (%d s), got %d s", t.MaxRuntime, t.RuntimeCap)
	}
	if t.StaleAfter != 0 && t.HeartbeatInterval != 0 && t.StaleAfter < 2*t.HeartbeatInterval {
		return fmt.Errorf("timings.staleAfter: must be at least twice heartbeatInterval (%d s), got %d s", t.HeartbeatInterval, t.StaleAfter)
	}
	return nil
}

// Validate checks one idle window; the error starts with the field name.
func (w IdleWindow) Validate() error {
	if _, err := cronParser.Parse(w.Cron); err != nil {
		return fmt.Errorf("cron: %q is not a 5-field cron expression (minute hour day-of-month month day-of-week): %v", w.Cron, err)
	}
	if w.TimeZone == "" {
		return fmt.Errorf("timeZone: required (an IANA name such as Europe/Berlin or UTC)")
	}
	if _, err := time.LoadLocation(w.TimeZone); err != nil {
		return fmt.Errorf("timeZone: %q is not an IANA time zone", w.TimeZone)
	}
	if w.IdleCount < 0 {
		return fmt.Errorf("idleCount: must be 0 or more, got %d", w.IdleCount)
	}
	if w.EvictionStrategy != "oldest_first" && w.EvictionStrategy != "newest_first" {
		return fmt.Errorf("evictionStrategy: %q must be oldest_first or newest_first", w.EvictionStrategy)
	}
	return nil
}

// Active reports whether the window's cron matches the minute of now in its
// time zone. Matching the whole minute, not the moment the schedule fires,
// avoids the peer's bug of a window honoured only within seconds of its cron.
func (w IdleWindow) Active(now time.Time) bool {
	sched, err := cronParser.Parse(w.Cron)
	if err != nil {
		return false
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil {
		return false
	}
	minute := now.In(loc).Truncate(time.Minute)
	return sched.Next(minute.Add(-time.Second)).Equal(minute)
}

// ActiveWindow returns the first window active at now; none active means an
// idle count of 0.
func (p PoolConfig) ActiveWindow(now time.Time) (IdleWindow, bool) {
	for _, w := range p.IdleWindows {
		if w.Active(now) {
			return w, true
		}
	}
	return IdleWindow{}, false
}
