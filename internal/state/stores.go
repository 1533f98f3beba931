package state

// One store per aggregate of the state table. Each is a view of the same
// core (client, table, clock); none reads or writes another's items, except
// where a method says so (Store.FindInstance reads pools, then instances).

// Instances reads and writes instance records: their transitions (the
// control plane's), the agent's writes, the JIT exchange and the queries of
// the instances index.
type Instances struct{ *core }

// Runs reads and writes run items: one per provision request.
type Runs struct{ *core }

// Reruns reads and writes the reruns of workflow runs a spot interruption
// failed, and each pool's set of pending reruns.
type Reruns struct{ *core }

// Pools reads and writes pool configurations (and the runner target "latest"
// resolves to, kept beside a pool's configuration).
type Pools struct{ *core }

// Capacity reads and writes a pool's capacity item (reservations and the
// queue of waiting runs) and its repositories' provision leases (fair share).
type Capacity struct{ *core }

// Leases reads and writes the named leases that keep one handler at a time
// and the handlers' last runs.
type Leases struct{ *core }

// Tokens records the one-time tokens used (replay refusal).
type Tokens struct{ *core }

// RunnerReleases reads and writes the cached list of actions/runner releases.
type RunnerReleases struct{ *core }

// ScaleSets reads and writes the scale-set listeners' status items.
type ScaleSets struct{ *core }

// SpotBreakers reads and writes each pool's spot-interruption breaker.
type SpotBreakers struct{ *core }
