package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// The agent's small files in StateDir (registration, pre-runner outcome,
// lease anchors, install failure): what a restarted agent reads back.

// loadFile reads a state file into v; it reports whether it could.
func (a *Agent) loadFile(name string, v any) bool {
	raw, err := os.ReadFile(filepath.Join(a.Config.StateDir, name))
	if err != nil {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		a.Log.Warn("ignoring unreadable state file", "file", name, "err", err)
		return false
	}
	return true
}

// saveFile writes atomically, so a crash never leaves half a file. A
// file that cannot be written is logged with why (the caller goes on: the
// file only spares a restarted agent work) and reported.
func (a *Agent) saveFile(name string, v any) error {
	err := writeFile(filepath.Join(a.Config.StateDir, name), v)
	if err != nil {
		a.Log.Error("cannot save state file", "file", name, "err", err)
	}
	return err
}

func writeFile(path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", raw, 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		os.Remove(path + ".tmp")
		return err
	}
	return nil
}
