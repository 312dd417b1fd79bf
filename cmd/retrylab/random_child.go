package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/tokenbucket"
)

// childArg, as the first argument of the retrylab binary, makes it run one
// policy's run of one storm and nothing else: the storm as JSON on its
// standard input, the policy's name as the next argument, the run's
// stormRun as JSON on its standard output. It is not a flag of the usage:
// only the random scenario starts it (runChild), so that each run has a
// process of its own.
const childArg = "-retrylab-random-child"

// randomPolicies are the policies the random scenario compares, the
// defaults first (judge reads them so).
func randomPolicies() []policy {
	return []policy{freshDefaultsPolicy(), fullJitterPolicy(), noRetriesPolicy(), retryablehttpPolicy()}
}

// stormRun is what one policy's run of a storm measured. Durations are
// nanoseconds in JSON.
type stormRun struct {
	Policy   string        `json:"policy"`
	Requests int           `json:"requests"` // logical: an open loop's arrivals, a closed loop's batch
	Sent     int           `json:"sent"`     // of those, sent (a closed loop stopped at its cap sends fewer)
	OK       int           `json:"ok"`       // answered 200
	Attempts int64         `json:"attempts"` // at the server, from the load's start
	Refused  int64         `json:"refused"`  // requests that ended on a retry the budget refused
	P50      time.Duration `json:"p50"`      // latency of the sent requests, failures included
	P99      time.Duration `json:"p99"`
	Max      time.Duration `json:"max"`
	Finish   time.Duration `json:"finish,omitempty"`  // closed loop: from the start until its last request ended
	Stopped  bool          `json:"stopped,omitempty"` // closed loop: at its cap, with requests not sent or in flight
	LagP99   time.Duration `json:"lag_p99"`           // the machine check's probe
	LagMax   time.Duration `json:"lag_max"`
	Capacity float64       `json:"capacity,omitempty"` // capacity storms: achieved over nominal while saturated; 0: not measured
	Took     time.Duration `json:"took"`               // the run, warm-up to close
	Runs     int           `json:"runs,omitempty"`     // 2 if run again (too loaded the first time)
}

// success is the share of the logical requests answered 200.
func (r stormRun) success() float64 { return float64(r.OK) / float64(max(r.Requests, 1)) }

// amplification is the attempts at the server per request sent.
func (r stormRun) amplification() float64 { return float64(r.Attempts) / float64(max(r.Sent, 1)) }

// check is the run's machine check, as the other scenarios' (health.go).
func (r stormRun) check() machineCheck {
	m := machineCheck{lagP99: r.LagP99, lagMax: r.LagMax, capacity: math.NaN(), runs: r.Runs}
	if r.Capacity > 0 {
		m.capacity = r.Capacity
	}
	return m
}

// childMain is the child process's main: it runs the policy args[0] on the
// storm read from stdin and writes its stormRun to stdout. It returns the
// process's exit code.
func childMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "retrylab %s: want one policy name, got %q\n", childArg, args)
		return 2
	}
	var s storm
	if err := json.NewDecoder(stdin).Decode(&s); err != nil {
		fmt.Fprintf(stderr, "retrylab %s: reading the storm: %v\n", childArg, err)
		return 2
	}
	i := slices.IndexFunc(randomPolicies(), func(p policy) bool { return p.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "retrylab %s: unknown policy %q\n", childArg, args[0])
		return 2
	}
	r, err := runStormPolicy(context.Background(), s, randomPolicies()[i])
	if err == nil {
		err = json.NewEncoder(stdout).Encode(r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "retrylab %s: %v\n", childArg, err)
		return 1
	}
	return 0
}

// stormHost is the host of one run: the storm's faults in front of its
// plain answer (or its capacity's queue). Before start it answers 200 and
// counts nothing (the warm-up).
type stormHost struct {
	s        storm
	start    time.Time
	bucket   *tokenbucket.Bucket // ratelimit; full at start
	queue    *queueServer        // capacity
	attempts atomic.Int64        // from start

	mu  sync.Mutex
	rng *rand.Rand
}

func newStormHost(s storm, start time.Time, buckets int) *stormHost {
	h := &stormHost{s: s, start: start, rng: rand.New(rand.NewPCG(s.Seed, uint64(s.Index)<<16|0x4057))}
	if s.Fault == faultRateLimit {
		h.bucket = tokenbucket.New(s.LimitRate, float64(s.LimitBurst), start)
	}
	if s.Fault == faultCapacity {
		h.queue = newQueueServer(s.CapWorkers, s.CapQueue, s.Work, s.ShedCost,
			func(t time.Time) bool { return s.failing(t.Sub(start)) }, start, bucketWidth, buckets)
	}
	return h
}

// float64 draws from the host's generator.
func (h *stormHost) float64() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.Float64()
}

func (h *stormHost) serve(w http.ResponseWriter, r *http.Request) int {
	now := time.Now()
	if now.Before(h.start) {
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	h.attempts.Add(1)
	at := now.Sub(h.start)
	s := h.s
	switch {
	case s.Fault == faultOutage && s.failing(at) && s.Reset:
		resetConn(w)
		return 0
	case s.Fault == faultOutage && s.failing(at):
		return fail(w, http.StatusServiceUnavailable, s.RetryAfter)
	case h.bucket != nil && !h.bucket.Take(now):
		return fail(w, http.StatusTooManyRequests, s.RetryAfter)
	case s.FailShare > 0 && h.float64() < s.FailShare:
		return fail(w, http.StatusServiceUnavailable, 0)
	case h.queue != nil:
		return h.queue.serve(w, r)
	}
	d := time.Duration(float64(s.Work) * (0.5 + h.float64()))
	if s.Fault == faultSlow && s.failing(at) {
		d += s.SlowBy
	}
	if err := sleep(r.Context(), d); err != nil {
		return 0 // the client went away
	}
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

// fail answers code at once, with Retry-After: retryAfter if positive.
func fail(w http.ResponseWriter, code, retryAfter int) int {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
	w.WriteHeader(code)
	return code
}

// resetConn resets the request's connection (SO_LINGER 0, then close): the
// client's attempt fails with a connection reset or EOF.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// close stops the host's queue, if it has one.
func (h *stormHost) close() {
	if h.queue != nil {
		h.queue.close()
	}
}

// span is the storm's nominal time: an open loop's arrivals, a closed
// loop's cap.
func (s storm) span() time.Duration {
	if s.Open {
		return s.Load
	}
	return s.Cap
}

// runStormPolicy runs storm s with policy p: a fresh host, a fresh
// Transport (and for the defaults, a fresh budget), the load, then the
// counts.
func runStormPolicy(ctx context.Context, s storm, p policy) (stormRun, error) {
	began := time.Now()
	start := began.Add(100 * time.Millisecond) // after the warm-up
	buckets := int((s.span()+randomClientGuard)/bucketWidth) + 1
	host := newStormHost(s, start, buckets)
	defer host.close()
	srv, err := startServer(host.serve, start, bucketWidth, 1)
	if err != nil {
		return stormRun{}, err
	}
	defer srv.close()
	base := newBase()
	defer base.CloseIdleConnections()
	var refused atomic.Int64
	extra := []retryhttp.Option{retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if d.Reason == retryhttp.StopBudgetRefused {
			refused.Add(1)
		}
	}})}
	if s.AttemptTimeout > 0 {
		extra = append(extra, retryhttp.WithAttemptTimeout(s.AttemptTimeout))
	}
	client := &http.Client{Transport: p.transport(base, 1, extra...), Timeout: randomClientGuard}
	if s.Warm {
		_ = get(ctx, client, srv.URL)
	}
	probe := startLagProbe(lagTick)
	if err := sleep(ctx, time.Until(start)); err != nil {
		probe.finish()
		return stormRun{}, err
	}
	send := func(ctx context.Context) bool {
		if s.Deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.Deadline)
			defer cancel()
		}
		return get(ctx, client, srv.URL) == nil
	}
	r := stormRun{Policy: p.name}
	var outcomes []outcome
	if s.Open {
		outcomes = poissonLoad(ctx, s, start, send)
		r.Requests = len(outcomes)
	} else {
		outcomes, r.Finish, r.Stopped = closedLoad(ctx, s, start, send)
		r.Requests = s.Requests
	}
	lags := probe.finish()
	srv.close()
	if host.queue != nil {
		// Over the load only: a worker that goes idle marks its bucket
		// idle, not the buckets it then sleeps through, so the quiet
		// after the load would read as a saturated server doing nothing.
		load := s.Load
		if !s.Open {
			load = r.Finish
		}
		if c := host.queue.capacity(min(buckets, int(load/bucketWidth))); !math.IsNaN(c) {
			r.Capacity = c
		}
	}
	r.Sent = len(outcomes)
	sum := summarize(outcomes)
	r.OK = int(math.Round(sum.success * float64(sum.requests)))
	r.P50, r.P99 = sum.p50, sum.p99
	for _, o := range outcomes {
		r.Max = max(r.Max, o.latency)
	}
	r.Attempts, r.Refused = host.attempts.Load(), refused.Load()
	if len(lags) > 0 {
		r.LagP99, r.LagMax = percentile(lags, 0.99), lags[len(lags)-1]
	}
	r.Took = time.Since(began)
	return r, ctx.Err()
}

// poissonLoad sends the open loop's requests: arrivals at s.Rate per
// second (Poisson, drawn from the storm's seed and index: the same for
// every policy) from start for s.Load, each in a goroutine of its own that
// does not wait for the earlier ones. It returns every outcome once all
// have ended.
func poissonLoad(ctx context.Context, s storm, start time.Time, send func(context.Context) bool) []outcome {
	rng := rand.New(rand.NewPCG(s.Seed, uint64(s.Index)<<16|0xa77))
	var arrivals []time.Duration
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / s.Rate * float64(time.Second))
		if at >= s.Load {
			break
		}
		arrivals = append(arrivals, at)
	}
	outcomes := make([]outcome, len(arrivals))
	var wg sync.WaitGroup
	for k, at := range arrivals {
		if err := sleep(ctx, time.Until(start.Add(at))); err != nil {
			outcomes = outcomes[:k]
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			arrival := start.Add(at)
			ok := send(ctx)
			outcomes[k] = outcome{latency: time.Since(arrival), ok: ok, at: at}
		}()
	}
	wg.Wait()
	return outcomes
}

// closedLoad runs the closed loop's batch: s.Workers workers pull the
// numbers of s.Requests requests from a queue, each sending one and
// waiting for its answer, then thinking (exponential, mean s.Think) before
// it takes the next, until the batch is done or s.Cap has passed since
// start. It returns the outcomes of the requests sent, the batch's wall
// time (until its last request ended; s.Cap if stopped), and whether it
// was stopped at its cap: requests not sent, or cancelled in flight (they
// count as failed).
func closedLoad(ctx context.Context, s storm, start time.Time, send func(context.Context) bool) ([]outcome, time.Duration, bool) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(s.Cap))
	defer cancel()
	jobs := make(chan int, s.Requests)
	for i := range s.Requests {
		jobs <- i
	}
	close(jobs)
	var mu sync.Mutex
	outcomes := make([]outcome, 0, s.Requests)
	var wg sync.WaitGroup
	for w := range s.Workers {
		rng := rand.New(rand.NewPCG(s.Seed, uint64(s.Index)<<16|uint64(w)<<32|0x7417))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				ok := send(ctx)
				o := outcome{latency: time.Since(t0), ok: ok, at: t0.Sub(start)}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if s.Think > 0 && sleep(ctx, time.Duration(rng.ExpFloat64()*float64(s.Think))) != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	stopped := ctx.Err() != nil // the cap came before the batch's end
	var finish time.Duration
	for _, o := range outcomes {
		finish = max(finish, o.at+o.latency)
	}
	if stopped {
		finish = s.Cap
	}
	return outcomes, finish, stopped
}

// errChild is a child process that did not give a run.
var errChild = errors.New("the storm's child process failed")

// childCommandLine is the command line of a child: for the error messages.
func childCommandLine(exe, policy string) string {
	return fmt.Sprintf("%s %s %q < storm.json", exe, childArg, policy)
}

// mainChild runs childMain (or quotaChildMain) if the process was started
// as a child of the random (or the quota) scenario, and reports whether it
// was; main and TestMain call it first.
func mainChild() (int, bool) {
	switch {
	case len(os.Args) < 2:
		return 0, false
	case os.Args[1] == childArg:
		return childMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr), true
	case os.Args[1] == quotaChildArg:
		return quotaChildMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr), true
	}
	return 0, false
}
