package blackbox

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/blip"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/internal/tokenbucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Closed loops against real loopback servers, in real time: a batch job
// against a rate-limited API, a worker pool through a short outage, and
// the bounds of the pause lane (pause.go, internal/budget/lane.go). Each
// test makes a Transport with a budget of its own (newTransport's
// ownBudget, or one built here), so that no state of another test's host
// leaks in. Every loop ends by itself: the batches are finite and every
// request carries a deadline.

// loopRequestHeader names a logical request: every attempt of it, retries
// included, carries the same value, so that a server can tell a retry that
// came back before the pause its last 429 stated.
const loopRequestHeader = "X-Loop-Request"

// loopGuard bounds every request of this file: a hang fails the test
// rather than the whole run.
const loopGuard = 15 * time.Second

// pauseLedger remembers, per logical request, when its last pause answer
// was written and the pause it stated, and counts the retries that came
// back earlier than that (early). The time of a pause answer is taken
// before it is written: a client that waits the stated pause from when it
// reads the answer is never early.
type pauseLedger struct {
	early atomic.Int64

	mu   sync.Mutex
	last map[string]time.Time // not before this time
}

// arrive records an arrival of logical request id at now, counting it as
// early if its last pause has not run out; pause > 0 records the pause
// answered to it now.
func (p *pauseLedger) arrive(id string, now time.Time, pause time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[string]time.Time{}
	}
	if until, ok := p.last[id]; ok && now.Before(until) {
		p.early.Add(1)
	}
	if pause > 0 {
		p.last[id] = now.Add(pause)
	}
}

// getAs sends a GET of url as logical request id, with a deadline of
// timeout, and returns the response's status (0 and the error if none),
// its body read and closed.
func getAs(c *http.Client, url, id string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if id != "" {
		req.Header.Set(loopRequestHeader, id)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	drain(res)
	return res.StatusCode, nil
}

// drain reads and closes a response body.
func drain(res *http.Response) {
	buf := make([]byte, 512)
	for {
		if _, err := res.Body.Read(buf); err != nil {
			break
		}
	}
	res.Body.Close()
}

// p99 returns the 99th percentile of ds (nearest rank), 0 for none.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// A batch job whose workers all wait on a rate-limited API (a closed
// loop: 30 requests from 30 workers at once, against 10/s in bursts of
// 10, the excess answered 429 with Retry-After: 1) gets every request
// through, in about the time the API takes to allow them, without a retry
// coming back before the pause the API asked for, and at about two
// requests at the API per request. Meanwhile an endpoint of the same host
// that is not limited keeps its latency: the lane holds back the retries
// of the paused requests, not the host's other traffic.
func TestClosedLoopRateLimitedBatch(t *testing.T) {
	const (
		n, workers  = 30, 30
		rate, burst = 10, 10
		retryAfter  = time.Second
	)
	bucket := tokenbucket.New(rate, burst, time.Now())
	var ledger pauseLedger
	var limited, free atomic.Int64
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/limited" {
			free.Add(1)
			return
		}
		now := time.Now()
		limited.Add(1)
		if bucket.Take(now) {
			ledger.arrive(r.Header.Get(loopRequestHeader), now, 0)
			return
		}
		ledger.arrive(r.Header.Get(loopRequestHeader), now, retryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
	})
	c := &http.Client{Transport: testkit.NewTransport(t)}

	// The probe of the free endpoint, every 20ms through the same client
	// until the batch is done.
	var (
		lat       []time.Duration
		freeFails int
	)
	stop := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			began := time.Now()
			if status, err := getAs(c, srv.URL+"/free", "", loopGuard); err != nil || status != http.StatusOK {
				freeFails++
				continue
			}
			lat = append(lat, time.Since(began))
		}
	}()

	start := time.Now()
	statuses := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < n; j += workers {
				statuses[j], errs[j] = getAs(c, srv.URL+"/limited", strconv.Itoa(j), loopGuard)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-probed

	ok := 0
	for i := range n {
		if errs[i] == nil && statuses[i] == http.StatusOK {
			ok++
		}
	}
	perRequest := float64(limited.Load()) / n
	limit := time.Duration(float64(n-burst) / rate * float64(time.Second))
	t.Logf("batch: %d/%d ok in %v (limit %v), %d at the API = %.2f per request, %d early; free: %d GETs, %d failed, p99 %v",
		ok, n, elapsed.Round(time.Millisecond), limit, limited.Load(), perRequest, ledger.early.Load(), len(lat), freeFails, p99(lat))

	assert.Equal(t, n, ok, "every request of the batch succeeds (statuses %v, errors %v)", statuses, errs)
	assert.Zero(t, ledger.early.Load(), "no retry comes back before the pause its 429 stated")
	assert.LessOrEqual(t, perRequest, 2.4, "requests at the API per request")
	assert.LessOrEqual(t, elapsed, limit*3/2+time.Second, "the batch ends near the time the API takes to allow it")

	assert.Zero(t, freeFails, "the free endpoint never fails")
	assert.NotEmpty(t, lat)
	// 100ms, not 50: under -race on two loaded cores a loopback GET's
	// p99 alone can reach tens of milliseconds; a free GET held behind the
	// lane would take a pause's 1s.
	assert.LessOrEqual(t, p99(lat), 100*time.Millisecond, "the free endpoint keeps its latency")
}

// blipServer answers 200, except for blipFor from the first request that
// arrives once it is armed (internal/blip): 503 at once, without
// Retry-After.
type blipServer struct {
	*testkit.CountingServer
	blip.Switch
}

const blipFor = 300 * time.Millisecond

func newBlipServer(t *testing.T) *blipServer {
	s := &blipServer{}
	s.CountingServer = testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		if s.Failing(time.Now(), blipFor) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	return s
}

// end returns when the blip ended (zero if it never started).
func (s *blipServer) end() time.Time {
	if from := s.Start(); !from.IsZero() {
		return from.Add(blipFor)
	}
	return time.Time{}
}

// blipGets runs callers goroutines that each send gets GETs to url, one
// after the other, and returns how many failed and when the last ended.
func blipGets(c *http.Client, url string, callers, gets int) (failed int, last time.Time) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range gets {
				status, err := getAs(c, url, "", loopGuard)
				mu.Lock()
				if err != nil || status != http.StatusOK {
					failed++
				}
				last = time.Now()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, last
}

// releases records when each parked retry of a transport was parked and
// released, in real time.
type releases struct {
	mu    sync.Mutex
	spans [][2]time.Time // parked, released
}

func (r *releases) option() retryhttp.Option {
	return retryhttp.WithHooks(retryhttp.Hooks{OnPark: func(e retryhttp.ParkEvent) {
		if e.Kind != retryhttp.ParkReleased {
			return
		}
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.spans = append(r.spans, [2]time.Time{now.Add(-e.Waited), now})
	}})
}

// drainAfter returns the time from the first release after end (the host
// answered a probe) to the last: how fast the queue drained once the host
// answered again.
func (r *releases) drainAfter(end time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first, last time.Time
	for _, s := range r.spans {
		if !s[1].After(end) {
			continue
		}
		if first.IsZero() || s[1].Before(first) {
			first = s[1]
		}
		last = later(last, s[1])
	}
	return last.Sub(first)
}

// lagAfter returns the longest a parked retry released after end waited
// from end, or from when it parked if later: how long the parked retries
// waited once the host answered again.
func (r *releases) lagAfter(end time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lag time.Duration
	for _, s := range r.spans {
		if s[1].After(end) {
			lag = max(lag, s[1].Sub(later(s[0], end)))
		}
	}
	return lag
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// A worker pool of 50 goroutines sharing one Transport rides out a 300ms
// outage of its host (503s without Retry-After): the retries that find no
// token park, and once the host answers again, each success of a released
// retry releases the next, so that the parked retries drain as fast as
// the host answers rather than at a poll's pace or at MaxWait (2s). Warm
// (the Transport has seen its host answer): at most 2 of 100 GETs fail.
// Cold (its first requests meet the outage): none of 50 fails.
//
// How fast the pool is done once the host answers is measured two ways.
// The parked retries: none waits more than 500ms once the host answers
// (observed under -race on two cores: 20-160ms, up to 275ms on a loaded
// machine: the chain of releases answered one after the other). The last
// request: within 1.3s of the outage's end. That bound is the default
// backoff's, not the parking's: a request whose first two retries took
// tokens and failed within the outage waits up to 1s (uniform in
// [0, 1s)) before its third, so its end falls anywhere up to about 1s
// after the outage (observed: 50-920ms; about one run in five over
// 500ms), where a pool whose parked retries waited for MaxWait ended 2s
// after it.
func TestClosedLoopWorkerPoolBlip(t *testing.T) {
	const (
		callers = 50
		// From the first release after the blip to the last: 11-54ms
		// cold, 270-420ms warm under -race on 2 cores (warm, the
		// callers' second GETs are first attempts enough to pace the
		// releases by, at 1.5 each); 2s before answers released the
		// parked retries.
		queueBound = 700 * time.Millisecond
		lagBound   = time.Second // the gate's quiet (250ms) and its probe, then the drain
		drainBound = 1300 * time.Millisecond
	)
	for _, warm := range []bool{true, false} {
		name := map[bool]string{true: "warm", false: "cold"}[warm]
		t.Run(name, func(t *testing.T) {
			srv := newBlipServer(t)
			var ev testkit.ParkEvents
			var rel releases
			c := &http.Client{Transport: testkit.NewTransport(t, ev.Option(), rel.option())}
			gets := 1
			if warm {
				failed, _ := blipGets(c, srv.URL, callers, 1)
				require.Zero(t, failed, "the warm-up")
				time.Sleep(20 * time.Millisecond)
				gets = 2
			}
			srv.Arm()
			failed, last := blipGets(c, srv.URL, callers, gets)
			end := srv.end()
			require.False(t, end.IsZero(), "the blip started")
			drained, lag, queue := last.Sub(end), rel.lagAfter(end), rel.drainAfter(end)
			t.Logf("%s: %d of %d failed, %d attempts at the server; parked %d, released %d, dropped %d; "+
				"a parked retry waited at most %v after the blip, the queue drained in %v once the host answered, "+
				"the last answer came %v after the blip",
				name, failed, callers*gets, srv.Arrivals.Load(),
				ev.Count(retryhttp.ParkParked), ev.Count(retryhttp.ParkReleased), ev.Count(retryhttp.ParkDropped),
				lag.Round(time.Millisecond), queue.Round(time.Millisecond), drained.Round(time.Millisecond))

			if warm {
				assert.LessOrEqual(t, failed, 2, "GETs failed of %d", callers*gets)
			} else {
				assert.Zero(t, failed, "GETs failed of %d", callers*gets)
			}
			assert.GreaterOrEqual(t, ev.Count(retryhttp.ParkParked), callers/2, "retries were parked")
			assert.Equal(t, ev.Count(retryhttp.ParkParked), ev.Count(retryhttp.ParkReleased), "every parked retry was released")
			assert.LessOrEqual(t, queue, queueBound, "the parked retries drain once the host answers")
			assert.LessOrEqual(t, lag, lagBound, "the host answers a probe soon after the blip")
			assert.LessOrEqual(t, drained, drainBound, "the pool is done soon after the host answers")
		})
	}
}

// A server that asks for a pause longer than the budget's MaxWait
// (Retry-After: 1 against MaxWait 200ms) gets it: the retry waits the
// whole pause, then is sent and succeeds, rather than being refused for
// want of a host that answered within MaxWait.
func TestPauseLongerThanMaxWaitIsWaited(t *testing.T) {
	const n = 5 // requests at once, each answered 429 once
	var ledger pauseLedger
	var mu sync.Mutex
	seen := map[string]int{}
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		id := r.Header.Get(loopRequestHeader)
		mu.Lock()
		seen[id]++
		first := seen[id] == 1
		mu.Unlock()
		if !first {
			ledger.arrive(id, now, 0)
			return
		}
		ledger.arrive(id, now, time.Second)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{MaxWait: 200 * time.Millisecond})
	var ev testkit.ParkEvents
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithRetryBudget(b), ev.Option())}

	start := time.Now()
	statuses := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], errs[i] = getAs(c, srv.URL, strconv.Itoa(i), loopGuard)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d requests: statuses %v in %v, %d attempts, %d early, dropped %d", n, statuses, elapsed.Round(time.Millisecond),
		srv.Attempts.Load(), ledger.early.Load(), ev.Count(retryhttp.ParkDropped))

	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, http.StatusOK, statuses[i], "request %d: the retry is sent, not refused", i)
	}
	assert.Equal(t, int64(2*n), srv.Attempts.Load(), "one retry per request")
	assert.Zero(t, ledger.early.Load(), "every retry waited the pause stated")
	assert.GreaterOrEqual(t, elapsed, time.Second)
	assert.Zero(t, ev.Count(retryhttp.ParkDropped), "no retry gave up in the lane")
}

// The lane is bounded by the caller's deadline: against a host that
// answers 429 with Retry-After: 1 to everything, a batch of requests with
// a 2.5s deadline each ends by its deadline with the 429 (the response,
// not an error, nor a hang), and the host sees few more requests than the
// batch: the lane releases one retry, whose answer (another pause) sets
// its pace to one per stated pause, so that about one retry a second
// leaves before the deadlines run out.
//
// With an attempt timeout, a retry waiting in the lane gives up one
// attempt timeout before the deadline, and the caller gets the 429.
// Without one, its bound is the deadline itself: a wait in the lane that
// reaches it ends with the 429 (park.go), but a retry released or waiting
// its pause in the last instants before the deadline may still meet the
// context's end and return its error (nothing is left for the attempt);
// the subtest accepts both and counts them.
func TestPauseLaneBoundedByDeadline(t *testing.T) {
	const (
		n        = 10
		deadline = 2500 * time.Millisecond
	)
	for _, attemptTimeout := range []time.Duration{250 * time.Millisecond, 0} {
		name := "attempt timeout"
		if attemptTimeout == 0 {
			name = "no attempt timeout"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // both wait in real time, on servers of their own
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			})
			c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithAttemptTimeout(attemptTimeout))}

			start := time.Now()
			statuses := make([]int, n)
			errs := make([]error, n)
			ended := make([]time.Duration, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses[i], errs[i] = getAs(c, srv.URL, strconv.Itoa(i), deadline)
					ended[i] = time.Since(start)
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			deadlineErrs := 0
			for i := range n {
				if attemptTimeout == 0 && errors.Is(errs[i], context.DeadlineExceeded) {
					deadlineErrs++
					continue
				}
				require.NoError(t, errs[i], "request %d ends with the response, not an error", i)
				assert.Equal(t, http.StatusTooManyRequests, statuses[i], "request %d", i)
			}
			t.Logf("%d requests: statuses %v, %d ended with the context's error, ended %v, %d attempts at the host",
				n, statuses, deadlineErrs, ended, srv.Attempts.Load())
			// The deadline, and the scheduling of ten goroutines under
			// -race.
			assert.LessOrEqual(t, elapsed, deadline+300*time.Millisecond, "the batch ends by its deadline")
			// n first attempts; then the lane's releases: the first
			// after the pause (1s, up to 1.33s with the jitter), the next
			// a gap (the pause, 1s) after its 429, so at most two before
			// 2.5s; and the retries the lane would not release before the
			// deadline, sent with a token as any retry if their pause ends
			// before it (seen: 2 to 3 in all, never more than n+3). A
			// naive retry sends 3n by the deadline.
			assert.LessOrEqual(t, srv.Attempts.Load(), int64(n+5), "attempts at the host")
		})
	}
}
