package inbound

import (
	"context"
	"errors"
	"time"
)

// The queue of a LoadShedder: requests over the limit wait for a slot, first
// come first served, for at most MaxQueueWait. A slot freed while requests
// wait is handed to the first of them, so it is never left free while one
// waits; new arrivals queue behind the waiters instead of taking it.

// shedWaiter is a request waiting in the queue. ready receives once, when a
// slot is handed to it; granted, under mu, says that it was.
type shedWaiter struct {
	ready   chan struct{}
	granted bool
}

// wait queues the request, if the queue has room, until a slot is handed
// to it, MaxQueueWait passes or ctx is done. It returns ShedNone if the
// request holds a slot, and the reason it is shed otherwise.
func (s *LoadShedder) wait(ctx context.Context) (inflight int64, waited time.Duration, reason ShedReason) {
	if s.maxQueue == 0 {
		return 0, 0, ShedOverLimit
	}
	s.mu.Lock()
	// Counted before trying, so that a release that finds no waiter has
	// freed its slot before this try: a slot is never left free while a
	// request waits for one.
	s.queued.Add(1)
	s.dispatchLocked()
	if len(s.waiters) == 0 {
		if n, ok := s.tryAcquire(); ok {
			s.queued.Add(-1)
			s.mu.Unlock()
			return n, 0, ShedNone
		}
	}
	if len(s.waiters) >= s.maxQueue {
		s.queued.Add(-1)
		s.mu.Unlock()
		return 0, 0, ShedOverLimit
	}
	wt := &shedWaiter{ready: make(chan struct{}, 1)}
	s.waiters = append(s.waiters, wt)
	s.mu.Unlock()

	start := s.now()
	timeout, stop := s.newTimer(s.maxQueueWait)
	select {
	case <-wt.ready:
	case <-timeout:
		reason = ShedQueueTimeout
	case <-ctx.Done():
		reason = ShedCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = ShedExpired // the caller's deadline (Deadline), or the server's
		}
	}
	stop()
	waited = s.now().Sub(start)
	if reason != ShedNone {
		s.mu.Lock()
		granted := wt.granted
		if !granted {
			s.removeLocked(wt)
		}
		s.mu.Unlock()
		if !granted {
			return 0, waited, reason
		}
		// A slot was handed over as the wait ended: use it, unless the
		// caller is gone.
		if reason == ShedCanceled || reason == ShedExpired {
			s.release()
			return 0, waited, reason
		}
	}
	return s.inflight.Load(), waited, ShedNone
}

// dispatchLocked hands free slots to the waiters, first come first served.
// Requires that mu is held.
func (s *LoadShedder) dispatchLocked() {
	for len(s.waiters) > 0 {
		if _, ok := s.tryAcquire(); !ok {
			return
		}
		wt := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		wt.granted = true
		s.queued.Add(-1)
		wt.ready <- struct{}{}
	}
}

// removeLocked takes wt out of the queue. Requires that mu is held.
func (s *LoadShedder) removeLocked(wt *shedWaiter) {
	for i, w := range s.waiters {
		if w == wt {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			s.queued.Add(-1)
			return
		}
	}
}

func newRealTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
