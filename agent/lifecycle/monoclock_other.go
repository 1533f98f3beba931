//go:build !linux

package lifecycle

import "time"

// sinceBoot is not available here: the agent counts from its own start
// (see monoClock) and keeps no anchors across restarts.
func sinceBoot() (time.Duration, bool) { return 0, false }

func bootID(string) string { return "" }
