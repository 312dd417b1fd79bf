package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ratelimit scenario. It runs in real time: a Retry-After is whole seconds,
// which no timescale divides.
const (
	freeEvery      = 20 * time.Millisecond // the /free probe's pace
	batchClientCap = 30 * time.Second      // http.Client.Timeout of the batches' and open loop's clients: a guard
	rowGrace       = 30 * time.Second      // a batch row stops after twice its physical limit and this
)

// batch is a closed-loop batch job against a rate-limited API: workers
// goroutines share one http.Client and pull the numbers of n requests from a
// channel, each sending GET /limited and waiting for its answer before it
// takes the next. The API allows rate requests per second, in bursts of up
// to burst, and answers the excess 429 with Retry-After: retryAfter.
type batch struct {
	name       string
	n, workers int
	rate       float64 // per second
	burst      int
	retryAfter int  // seconds
	probe      bool // GET /free every freeEvery meanwhile, through the same client
	// minN and minWorkers are the floors of n and workers when the run is
	// scaled down (scaledRateSetup): the least that still shows what the
	// batch is there for.
	minN, minWorkers int
}

// limit is the batch's physical limit: the time the API takes to allow n
// requests, a full bucket's burst at once and the rest at its rate.
func (b batch) limit() time.Duration {
	return time.Duration(float64(max(b.n-b.burst, 0)) / b.rate * float64(time.Second))
}

// openLoop is the open-loop load of the ratelimit scenario: requests arrive
// at offered per second for duration, each in a goroutine of its own that
// does not wait for the earlier ones, at an API allowing rate per second in
// bursts of burst.
type openLoop struct {
	rate, offered float64 // per second
	burst         int
	retryAfter    int // seconds
	duration      time.Duration
}

// rateSetup is what the ratelimit scenario runs.
type rateSetup struct {
	batches []batch
	open    openLoop
	// scale is the size of the setup against defaultRateSetup's
	// (scaledRateSetup); 0 for a setup not derived from it.
	scale float64
}

// defaultRateSetup is the ratelimit scenario of the lab's default run.
//
// The floors keep each batch's regime when the run is scaled down: wide
// still sends all its requests at once, twice the burst (limit 1s); pool
// still runs 2s past its burst, long enough for the /free probe; slow still
// lasts longer than a request's retries (limit 5s), which is what it is
// for; long pause still has requests beyond its burst wait its 3s
// Retry-After.
func defaultRateSetup() rateSetup {
	return rateSetup{
		batches: []batch{
			{name: "wide", n: 50, workers: 50, rate: 10, burst: 10, retryAfter: 1, minN: 20, minWorkers: 20},
			{name: "pool", n: 200, workers: 10, rate: 20, burst: 20, retryAfter: 1, probe: true, minN: 60, minWorkers: 5},
			{name: "slow", n: 100, workers: 4, rate: 2, burst: 2, retryAfter: 1, minN: 12, minWorkers: 4},
			{name: "long pause", n: 30, workers: 10, rate: 5, burst: 5, retryAfter: 3, minN: 10, minWorkers: 5},
		},
		open:  openLoop{rate: 100, burst: 20, offered: 150, retryAfter: 1, duration: 4 * time.Second},
		scale: 1,
	}
}

// scaledRateSetup is defaultRateSetup with its sizes scaled by s, at most 1:
// each batch's n and workers (to its floors, and workers at most n), and
// the open loop's duration (to 1s, in whole seconds). Rates, bursts and
// Retry-After stay. At s = 1 it is defaultRateSetup.
func scaledRateSetup(s float64) rateSetup {
	setup := defaultRateSetup()
	if s >= 1 {
		return setup
	}
	setup.scale = s
	for i := range setup.batches {
		b := &setup.batches[i]
		b.n = max(b.minN, int(math.Round(float64(b.n)*s)))
		b.workers = min(b.n, max(b.minWorkers, int(math.Round(float64(b.workers)*s))))
	}
	o := &setup.open
	o.duration = max(time.Second, time.Duration(float64(o.duration)*s).Round(time.Second))
	return setup
}

// batchRow is one policy's run of one batch.
type batchRow struct {
	batch    batch
	policy   policy
	sent, ok int // requests sent (n unless the row was stopped), and those answered 200
	elapsed  time.Duration
	arrivals int64 // attempts that reached /limited
	early    int64 // of those, retries sent before their last 429's pause had passed
	free     freeProbe
	stopped  bool // by its deadline: twice the limit, and rowGrace
}

// freeProbe is what GETs of /free saw during a batch.
type freeProbe struct {
	gets, failed int
	p99, max     time.Duration
}

// openRow is one policy's run of the open loop.
type openRow struct {
	policy          policy
	sum             summary
	arrivals, early int64
	amplification   float64
}

// rateResult is the ratelimit scenario's outcome.
type rateResult struct {
	setup   rateSetup
	batches []batchRow // by batch, then by policy
	open    []openRow
	took    time.Duration
}

// runRateLimit runs the ratelimit scenario of the run cfg describes: the
// default run's, scaled down by cfg.loopScale.
func runRateLimit(ctx context.Context, cfg config) (rateResult, error) {
	return rateLimitRun(ctx, cfg, scaledRateSetup(cfg.loopScale()))
}

// rateLimitRun runs every row of setup at once, each with a server and a
// client of its own: a row sends a few requests per second, so the rows do
// not disturb one another, and the scenario takes as long as its slowest
// row, not the sum.
func rateLimitRun(ctx context.Context, cfg config, setup rateSetup) (rateResult, error) {
	policies := rateLimitPolicies()
	r := rateResult{setup: setup, batches: make([]batchRow, len(setup.batches)*len(policies)), open: make([]openRow, len(policies))}
	began := time.Now()
	errs := make([]error, len(r.batches)+len(r.open))
	var wg sync.WaitGroup
	for i, b := range setup.batches {
		for j, p := range policies {
			k := i*len(policies) + j
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.batches[k], errs[k] = runBatch(ctx, b, p)
			}()
		}
	}
	for j, p := range policies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.open[j], errs[len(r.batches)+j] = runOpenLoop(ctx, cfg, setup.open, p)
		}()
	}
	wg.Wait()
	r.took = time.Since(began)
	return r, errors.Join(errs...)
}

// runBatch runs batch b with policy p on a fresh server and a fresh
// transport.
func runBatch(ctx context.Context, b batch, p policy) (batchRow, error) {
	l := newLimiter(b.rate, float64(b.burst), b.retryAfter)
	srv, err := startServer(l.serve, time.Now(), time.Second, 1)
	if err != nil {
		return batchRow{}, err
	}
	defer srv.close()
	base := newBase()
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: p.transport(base, 1), Timeout: batchClientCap}
	url := strings.TrimSuffix(srv.URL, "/")
	ctx, cancel := context.WithTimeout(ctx, 2*b.limit()+rowGrace)
	defer cancel()

	jobs := make(chan int, b.n)
	for i := range b.n {
		jobs <- i
	}
	close(jobs)
	var sent, ok atomic.Int64
	var wg sync.WaitGroup
	var probe *freeProber
	if b.probe {
		probe = startFreeProbe(c, url+freePath)
	}
	start := time.Now()
	for range b.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if ctx.Err() != nil {
					return
				}
				sent.Add(1)
				if getAs(ctx, c, url+limitedPath, strconv.Itoa(i)) == nil {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	row := batchRow{
		batch: b, policy: p, sent: int(sent.Load()), ok: int(ok.Load()), elapsed: time.Since(start),
		stopped: ctx.Err() != nil,
	}
	if probe != nil {
		row.free = probe.finish()
	}
	srv.close() // before reading the counts: no handler runs after
	row.arrivals, row.early = l.arrivals.Load(), l.early.Load()
	return row, nil
}

// freeProber GETs a URL every freeEvery, one at a time, until finished.
type freeProber struct {
	stop, done chan struct{}
	lat        []time.Duration
	failed     int
}

// startFreeProbe starts probing url through c.
func startFreeProbe(c *http.Client, url string) *freeProber {
	p := &freeProber{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(freeEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			t0 := time.Now()
			if get(context.Background(), c, url) != nil {
				p.failed++
			}
			p.lat = append(p.lat, time.Since(t0))
		}
	}()
	return p
}

// finish stops the probe, once its GET in flight has ended, and returns
// what it saw.
func (p *freeProber) finish() freeProbe {
	close(p.stop)
	<-p.done
	slices.Sort(p.lat)
	f := freeProbe{gets: len(p.lat), failed: p.failed, p99: percentile(p.lat, 0.99)}
	if len(p.lat) > 0 {
		f.max = p.lat[len(p.lat)-1]
	}
	return f
}

// runOpenLoop runs the open loop with policy p on a fresh server and a fresh
// transport: offered clients, each sending a GET every second from a phase
// drawn from the seed, for o.duration.
func runOpenLoop(ctx context.Context, cfg config, o openLoop, p policy) (openRow, error) {
	l := newLimiter(o.rate, float64(o.burst), o.retryAfter)
	start := time.Now().Add(20 * time.Millisecond)
	srv, err := startServer(l.serve, start, time.Second, 1)
	if err != nil {
		return openRow{}, err
	}
	defer srv.close()
	base := newBase()
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: p.transport(base, 1), Timeout: batchClientCap}
	url := strings.TrimSuffix(srv.URL, "/") + limitedPath
	var next atomic.Int64
	outcomes := drive(ctx, start, int(o.offered), time.Second, o.duration, cfg.seed, func(ctx context.Context, _ int) bool {
		return getAs(ctx, c, url, "o"+strconv.FormatInt(next.Add(1), 10)) == nil
	})
	srv.close()
	row := openRow{policy: p, sum: summarize(outcomes), arrivals: l.arrivals.Load(), early: l.early.Load()}
	row.amplification = float64(row.arrivals) / float64(max(row.sum.requests, 1))
	return row, nil
}

// rateSections turns the result into the report's sections: the batches,
// and the open loop.
func rateSections(r rateResult) []section {
	closed := section{
		id:    "ratelimit",
		title: "Rate-limited API, closed loops: batch jobs whose workers wait for each answer",
		notes: []string{
			"A token bucket of r requests per second and burst b answers GET /limited with 200 within its rate, and 429 with " +
				"Retry-After: N (whole seconds) beyond it; GET /free on the same server is never limited.",
			"W workers share one http.Client (one Transport, and for the defaults a retry budget of its own) and pull the " +
				"numbers of n requests from a channel; each sends GET /limited and waits for its answer before it takes the next.",
			"Limit: (n − b)/r, the time the API takes to allow n requests; elapsed/limit near 1 is as fast as the API allows " +
				"(below 1 only when requests failed). " +
				"Requests per request: attempts that reached /limited over n.",
			"Early: retries that reached the server before the pause stated by the previous 429 of the same logical request " +
				"had passed (the client's X-Lab-Request header, which every retry carries).",
			fmt.Sprintf("/free: during the pool batch, one more goroutine GETs /free every %v through the same client; its p99 "+
				"latency and failures.", freeEvery),
			fmt.Sprintf("Real time at any -timescale: a Retry-After is whole seconds. Every row of both tables runs at once, each "+
				"with its own server and client (at most a few hundred requests per second in all); a row is stopped after twice its limit "+
				"and %v. The scenario took %v.", rowGrace, r.took.Round(100*time.Millisecond)),
		},
		header: []string{"batch", "policy", "success", "elapsed", "elapsed/limit", "requests per request", "early",
			"/free p99", "/free failed"},
	}
	if s := r.setup.scale; s > 0 && s < 1 {
		closed.notes = append(closed.notes, fmt.Sprintf("Scaled down to %.3g of the default run's sizes (-clients/200 × -duration/4s): "+
			"each batch's n and W, to floors that keep its regime; rates, bursts and Retry-After as in the default run.", s))
	}
	for _, b := range r.setup.batches {
		closed.notes = append(closed.notes, fmt.Sprintf("%s: n=%d, W=%d, r=%g/s, b=%d, Retry-After: %d; limit %.1fs.",
			b.name, b.n, b.workers, b.rate, b.burst, b.retryAfter, b.limit().Seconds()))
	}
	var attempts, finish []bar
	for _, row := range r.batches {
		b := row.batch
		free, freeFailed := "—", "—"
		if b.probe {
			free, freeFailed = ms(row.free.p99), fmt.Sprintf("%d of %d", row.free.failed, row.free.gets)
		}
		elapsed := fmt.Sprintf("%.1fs", row.elapsed.Seconds())
		if row.stopped {
			elapsed += " (stopped)"
		}
		perRequest := float64(row.arrivals) / float64(max(b.n, 1))
		closed.rows = append(closed.rows, []string{
			b.name, row.policy.name, pct(float64(row.ok) / float64(max(b.n, 1))), elapsed,
			fmt.Sprintf("%.2f", row.elapsed.Seconds()/max(b.limit().Seconds(), 1e-9)),
			fmt.Sprintf("%.2f", perRequest), fmt.Sprint(row.early), free, freeFailed,
		})
		label := b.name + ", " + row.policy.name
		attempts = append(attempts, bar{label: label, value: perRequest, policy: row.policy.name})
		finish = append(finish, bar{label: label, value: row.elapsed.Seconds() / max(b.limit().Seconds(), 1e-9), policy: row.policy.name})
	}
	closed.policies = rateLimitPolicies()
	closed.charts = []chart{
		{file: "ratelimit.svg", svg: barChart{
			title: "Rate-limited API, closed loops: attempts at the server per request", xLabel: "attempts per request", bars: attempts,
		}.svg()},
		{file: "ratelimit-finish.svg", svg: barChart{
			title:  "Rate-limited API, closed loops: time to finish the batch, over the time the API allows",
			xLabel: "elapsed / limit (1: as fast as the API allows)", bars: finish, linear: true,
		}.svg()},
	}

	o := r.setup.open
	open := section{
		id:    "ratelimit-open",
		title: "Rate-limited API, open loop: arrivals beyond the limiter's rate",
		notes: []string{
			fmt.Sprintf("The same API, at %g requests per second with a burst of %d, offered %g requests per second (%.1f× its rate) "+
				"for %v: each arrival its own goroutine, which does not wait for the earlier ones.",
				o.rate, o.burst, o.offered, o.offered/o.rate, o.duration),
			"Amplification: attempts that reached the server over requests. Early as in the closed loops. Real time.",
		},
		header: []string{"policy", "requests", "server hits", "amplification", "success", "early", "p50", "p99"},
	}
	if s := r.setup.scale; s > 0 && s < 1 {
		open.notes = append(open.notes, fmt.Sprintf("Scaled down to %.3g of the default run's sizes: %v of load instead of 4s; "+
			"rates and burst as in the default run.", s, o.duration))
	}
	for _, row := range r.open {
		open.rows = append(open.rows, []string{
			row.policy.name, fmt.Sprint(row.sum.requests), fmt.Sprint(row.arrivals), fmt.Sprintf("%.2f×", row.amplification),
			pct(row.sum.success), fmt.Sprint(row.early), ms(row.sum.p50), ms(row.sum.p99),
		})
	}
	open.policies = rateLimitPolicies()
	return []section{closed, open}
}
