// Command sleeper is the one program of the images the tests build for a
// real docker daemon: it waits until it is killed, so a container of it
// runs the way a job's left-behind service container would.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
}
