package awstest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

func TestAPortIsOursOnlyWhileOurProcessListensOnIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if mine, err := listensOn(os.Getpid(), port); err != nil || !mine {
		t.Fatalf("this process listens on %d: listensOn = %v, %v", port, mine, err)
	}
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	if mine, _ := listensOn(sleeper.Process.Pid, port); mine {
		t.Fatalf("another process's listener on %d counted as the sleeper's", port)
	}
	ln.Close()
	if mine, _ := listensOn(os.Getpid(), port); mine {
		t.Fatalf("a closed listener on %d still counted", port)
	}
}

// The race a fresh-clone CI run lost: another test's moto took the port
// before ours bound it and answered our readiness check. Without the
// owner check waitReady returns nil here at once.
func TestAMotoAnsweringOnOurPortThatIsNotOursIsNotReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ours := exec.Command("sleep", "30") // ours: alive, never bound the port
	if err := ours.Start(); err != nil {
		t.Fatal(err)
	}
	defer ours.Process.Kill()
	e := &Moto{MotoURL: "http://" + ln.Addr().String(), port: port, cmd: ours, log: &testbin.Buffer{}, exited: make(chan struct{})}
	if err := e.waitReady(time.Second); err == nil {
		t.Fatal("another process's server on our port was taken for our moto")
	}
}
