package main

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// procs starts child processes, each in a process group of its own (nginx's
// workers and caddy's children go with their parent), and kills every group
// it started in killAll. Each group id is also appended to a file, one per
// line, so that run.sh can kill what is left if this program itself is
// killed.
type procs struct {
	mu      sync.Mutex
	started []*proc
	pgids   *os.File
}

// proc is one started process; done is closed when it has exited.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func newProcs(pgidFile string) (*procs, error) {
	f, err := os.OpenFile(pgidFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &procs{pgids: f}, nil
}

// start starts cmd and waits for it in a goroutine. The caller sets
// cmd.Stdout and cmd.Stderr; afterStart, if not nil, runs once the process
// has started (to close the parent's end of a pipe).
func (p *procs) start(name string, cmd *exec.Cmd, afterStart func()) (*proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if afterStart != nil {
		afterStart()
	}
	pr := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	p.mu.Lock()
	p.started = append(p.started, pr)
	fmt.Fprintln(p.pgids, cmd.Process.Pid)
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(pr.done)
	}()
	return pr, nil
}

// kill sends sig to the process's group.
func (pr *proc) kill(sig syscall.Signal) {
	_ = syscall.Kill(-pr.cmd.Process.Pid, sig)
}

// exited reports whether the process has exited.
func (pr *proc) exited() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// stop asks the process group to terminate, and kills it after grace.
func (pr *proc) stop(grace time.Duration) {
	if pr.exited() {
		return
	}
	pr.kill(syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(grace):
	}
	pr.kill(syscall.SIGKILL)
	<-pr.done
}

// killAll stops every process group started, newest first.
func (p *procs) killAll() {
	p.mu.Lock()
	started := p.started
	p.started = nil
	p.mu.Unlock()
	for i := len(started) - 1; i >= 0; i-- {
		started[i].stop(2 * time.Second)
	}
}
