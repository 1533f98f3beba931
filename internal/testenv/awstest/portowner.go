package awstest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Whose moto answers. freePort closes the port it found before moto binds
// it, seconds later on a loaded machine; another test process (go test
// runs packages side by side, each sandbox test starts a moto) can take
// the same port meanwhile. Then this moto fails to bind and exits, while
// the other one answers waitReady: two test worlds share one moto, one's
// terraform finds the other's table ("Table already exists") and one's
// functions call the other's fake GitHub, gone with its test (a
// fresh-clone CI run failed both ways at once). So ready means: the
// process we started listens on the port, read from /proc.

// listensOn reports whether process pid holds a listening TCP socket on
// 127.0.0.1:port (/proc/net/tcp's LISTEN entry for the port, and a socket
// of that inode among the process's descriptors).
func listensOn(pid, port int) (bool, error) {
	inodes, err := listeningInodes(port)
	if err != nil || len(inodes) == 0 {
		return false, err
	}
	fds, err := os.ReadDir(filepath.Join("/proc", fmt.Sprint(pid), "fd"))
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc", fmt.Sprint(pid), "fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes are the inodes of the sockets listening on
// 127.0.0.1:port or any address, from /proc/net/tcp (proc(5): the
// addresses in hex, the state 0A for LISTEN, the inode in column 10).
func listeningInodes(port int) (map[string]bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]bool{fmt.Sprintf("0100007F:%04X", port): true, fmt.Sprintf("00000000:%04X", port): true}
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !want[fields[1]] || fields[3] != "0A" {
			continue
		}
		out[fields[9]] = true
	}
	return out, sc.Err()
}
