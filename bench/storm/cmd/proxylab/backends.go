package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// backends are the two backend processes, the harness's own binary in
// backend mode, and the readers of their side-effect records.
type backends struct {
	exe     string
	work    time.Duration
	ports   [2]int
	procs   *procs
	led     *ledger
	log     *os.File
	cur     [2]*proc
	readers sync.WaitGroup
}

var backendNames = [2]string{"a", "b"}

// start starts backend i on its port. Its stdout is a pipe read until EOF,
// which comes when the process is gone, however it died.
func (b *backends) start(i int) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(b.exe, "backend", "-addr", fmt.Sprintf("127.0.0.1:%d", b.ports[i]), "-work", b.work.String())
	cmd.Stdout, cmd.Stderr = w, b.log
	pr, err := b.procs.start("backend "+backendNames[i], cmd, func() { _ = w.Close() })
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return err
	}
	b.readers.Add(1)
	go func() {
		defer b.readers.Done()
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			_, id, ok := strings.Cut(sc.Text(), " ")
			if ok {
				b.led.hit(id)
			}
		}
	}()
	b.cur[i] = pr
	return nil
}

// kill SIGKILLs backend i and waits until it is gone.
func (b *backends) kill(i int) {
	pr := b.cur[i]
	if !pr.exited() {
		pr.kill(syscall.SIGKILL)
	}
	<-pr.done
}

// killAndRestart SIGKILLs the backends listed, waits down, and restarts
// them on the same ports.
func (b *backends) killAndRestart(down time.Duration, which ...int) error {
	for _, i := range which {
		b.kill(i)
	}
	time.Sleep(down)
	for _, i := range which {
		if err := b.start(i); err != nil {
			return err
		}
	}
	return nil
}

// finish kills both backends and waits until every record they wrote has
// been read.
func (b *backends) finish() {
	for i := range b.cur {
		if b.cur[i] != nil {
			b.kill(i)
			b.cur[i] = nil
		}
	}
	b.readers.Wait()
}
