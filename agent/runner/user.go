package runner

// The runner user, as the user database has it.

import (
	"fmt"
	"os/user"
	"strconv"
)

func (r *Runner) chown(path string) error {
	uid, gid, owned, err := r.owner()
	if err != nil {
		return err
	}
	return chownIf(owned, path, uid, gid)
}

func lookup(name string) (uid, gid uint32, groups []uint32, home string, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, nil, "", fmt.Errorf("runner user %q: %w", name, err)
	}
	uid64, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid64, _ := strconv.ParseUint(u.Gid, 10, 32)
	ids, err := u.GroupIds()
	if err != nil {
		return 0, 0, nil, "", fmt.Errorf("runner user %q: its groups: %w", name, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return 0, 0, nil, "", fmt.Errorf("runner user %q: group id %q: %w", name, id, err)
		}
		groups = append(groups, uint32(g))
	}
	return uint32(uid64), uint32(gid64), groups, u.HomeDir, nil
}
