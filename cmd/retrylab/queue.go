package main

import (
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// queueServer is a server that keeps working for callers who have left: a
// fixed number of workers take requests from a FIFO queue, and do each
// request's work even if its client timed out while it waited (the work is
// then wasted). A request arriving to a full queue is shed with 503 at once,
// but shedding is not free: each one adds shedCost to the workers' work. While
// slow reports true for the time a request starts, its work takes twice as
// long (the capacity halves: the trigger of a metastable failure).
//
// The workers follow a model clock: a request starts when both it and its
// worker are ready in model terms, and ends its work later, whatever the
// real clock's scheduling. A worker woken late by a loaded machine catches
// up on its next requests, so that the server keeps its nominal capacity
// unless the machine cannot follow at all; the server measures whether it
// did (capacity).
type queueServer struct {
	workers  int
	work     time.Duration // per request, real time
	shedCost time.Duration // per shed request, real time
	slow     func(time.Time) bool

	queue chan *job
	sheds chan time.Time // the work of shed requests, done before queued ones
	stop  chan struct{}
	wg    sync.WaitGroup

	// Per bucket of the server's series: work done (ns, by when it
	// ended), and whether a worker was idle at some point.
	start   time.Time
	width   time.Duration
	done    []atomic.Int64
	idle    []atomic.Bool
	shedded atomic.Int64
}

// shedBacklog bounds the shed requests whose work is not done yet.
const shedBacklog = 1 << 14

// errStopped is returned by sleepUntil when the server stops.
var errStopped = errors.New("server stopped")

// job is a queued request.
type job struct {
	enqueued time.Time
	done     chan struct{} // closed when its work is done
}

// newQueueServer starts the workers of a server with queue places, whose
// series cover n buckets of width from start. Its close method stops them.
func newQueueServer(workers, queue int, work, shedCost time.Duration, slow func(time.Time) bool,
	start time.Time, width time.Duration, n int) *queueServer {
	q := &queueServer{
		workers: workers, work: work, shedCost: shedCost, slow: slow,
		queue: make(chan *job, queue), sheds: make(chan time.Time, shedBacklog), stop: make(chan struct{}),
		start: start, width: width, done: make([]atomic.Int64, max(n, 1)), idle: make([]atomic.Bool, max(n, 1)),
	}
	for range workers {
		q.wg.Add(1)
		go q.worker()
	}
	return q
}

// serve queues the request, or sheds it if the queue is full, and answers
// 200 once its work is done, if its client is still there.
func (q *queueServer) serve(w http.ResponseWriter, r *http.Request) int {
	j := &job{enqueued: time.Now(), done: make(chan struct{})}
	select {
	case q.queue <- j:
	default:
		select {
		case q.sheds <- j.enqueued:
		default: // a backlog of shedBacklog sheds: the server is down anyway
		}
		q.shedded.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	}
	select {
	case <-j.done:
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	case <-r.Context().Done():
		return 0 // the client left; its request stays queued, and is worked on
	}
}

// worker does the shed requests' work and the queue's requests, one at a
// time, on the model clock.
func (q *queueServer) worker() {
	defer q.wg.Done()
	var free time.Time // when this worker finished its last work, model clock
	for {
		var j *job
		var ready time.Time // when the work arrived
		select {
		case ready = <-q.sheds:
		default:
			select {
			case ready = <-q.sheds:
			case j = <-q.queue:
			default:
				q.idle[q.bucket(time.Now())].Store(true)
				select {
				case ready = <-q.sheds:
				case j = <-q.queue:
				case <-q.stop:
					return
				}
			}
		}
		d := q.shedCost
		if j != nil {
			ready, d = j.enqueued, q.work
		}
		begin := ready
		if begin.Before(free) {
			begin = free
		}
		if q.slow != nil && q.slow(begin) {
			d *= 2
		}
		free = begin.Add(d)
		if err := sleepUntil(q.stop, free); err != nil {
			return
		}
		q.done[q.bucket(free)].Add(int64(d))
		if j != nil {
			close(j.done)
		}
	}
}

// sleepUntil waits until t, or until stop is closed (then it returns
// errStopped).
func sleepUntil(stop <-chan struct{}, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-stop:
		return errStopped
	}
}

// bucket returns the index of the bucket of t.
func (q *queueServer) bucket(t time.Time) int {
	i := int(t.Sub(q.start) / q.width)
	return min(max(i, 0), len(q.done)-1)
}

// capacity returns the work done per worker and per unit of time over the
// buckets before n where every worker was busy all the time (no worker idle
// in it or the buckets around it): 1 when the server ran at its nominal
// capacity, less when the machine could not keep up. It returns NaN if no
// bucket was saturated.
func (q *queueServer) capacity(n int) float64 {
	n = min(n, len(q.done))
	var work time.Duration
	saturated := 0
	for i := 1; i+1 < n; i++ {
		if q.idle[i-1].Load() || q.idle[i].Load() || q.idle[i+1].Load() {
			continue
		}
		work += time.Duration(q.done[i].Load())
		saturated++
	}
	if saturated == 0 {
		return math.NaN()
	}
	return float64(work) / (float64(saturated) * float64(q.width) * float64(q.workers))
}

// close stops the workers; requests still queued are dropped.
func (q *queueServer) close() {
	close(q.stop)
	q.wg.Wait()
}
