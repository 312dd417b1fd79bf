package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/blip"
)

// Blip scenario, real time: the retry budget's own times (a parked
// retry's 2s MaxWait, its pace) are not scaled, and they are what the
// scenario measures.
const (
	blipCallers = 50 // at scale 1 (config.loopScale)
	blipLength  = 300 * time.Millisecond
	blipWork    = time.Millisecond        // a 200's time at the server
	blipTimeout = 30 * time.Second        // http.Client.Timeout: a guard
	blipDefault = 5                       // runs of each variant and row at scale 1, unless -runs says otherwise
	blipMaxRuns = 50                      // -runs at most
	blipSettle  = 20 * time.Millisecond   // between a warm-up and its blip
	blipNoDrain = time.Duration(-1 << 63) // drain of a run whose blip never started
)

// blipMinCallers are the callers of a scaled-down run at least: twice the
// default budget's capacity, so that a cold Transport's budget still cannot
// cover every caller's retry.
const blipMinCallers = 2 * retryhttp.DefaultRetryBudgetCapacity

// blipVariant is how a worker pool meets the blip.
type blipVariant struct {
	name string
	warm bool // each caller does one successful GET before the blip
	gets int  // per caller, one after the other, from the blip on
}

// blipVariants are the variants of the blip scenario: a pool whose
// Transport has already seen its host answer, and one whose first requests
// meet the blip.
var blipVariants = []blipVariant{{name: "warm", warm: true, gets: 2}, {name: "cold", gets: 1}}

// blipServer answers 200 after blipWork, except for blipLength from the
// first request that arrives once it is armed (internal/blip): 503 at
// once, without Retry-After.
type blipServer struct {
	blip.Switch
	failed atomic.Int64 // answered 503
}

func (s *blipServer) serve(w http.ResponseWriter, r *http.Request) int {
	if s.Failing(time.Now(), blipLength) {
		s.failed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	}
	if err := sleep(r.Context(), blipWork); err != nil {
		return 0
	}
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

// blipRun is one run of a variant with a policy.
type blipRun struct {
	requests, failed int   // from the blip on
	warmFailed       int   // warm-up GETs that failed
	attempts         int64 // at the server, from the blip on
	drain            time.Duration
}

// blipRow is a variant and a policy over every run.
type blipRow struct {
	variant    blipVariant
	policy     policy
	runs       []blipRun
	requests   int
	failed     int // over the runs
	worst      int // most failures of one run
	warmFailed int
	attempts   int64
}

// blipResult is the blip scenario's outcome.
type blipResult struct {
	rows    []blipRow // by variant, then by policy
	runs    int
	callers int
	scale   float64 // config.loopScale
	took    time.Duration
}

// runBlip runs every variant cfg.blipRuns times. In each run the rows run
// side by side, each with a server and a Transport of its own. Below scale
// 1 (config.loopScale), the callers are blipCallers scaled, to
// blipMinCallers.
func runBlip(ctx context.Context, cfg config) (blipResult, error) {
	policies := closedLoopPolicies()
	s := cfg.loopScale()
	r := blipResult{runs: cfg.blipRuns(), callers: blipCallers, scale: s}
	if s < 1 {
		r.callers = max(blipMinCallers, int(math.Round(blipCallers*s)))
	}
	for _, v := range blipVariants {
		for _, p := range policies {
			r.rows = append(r.rows, blipRow{variant: v, policy: p})
		}
	}
	began := time.Now()
	for range r.runs {
		for i, v := range blipVariants {
			runs := make([]blipRun, len(policies))
			errs := make([]error, len(policies))
			var wg sync.WaitGroup
			for j, p := range policies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runs[j], errs[j] = runBlipOnce(ctx, v, p, r.callers)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return r, err
			}
			if err := ctx.Err(); err != nil {
				return r, err
			}
			for j, run := range runs {
				row := &r.rows[i*len(policies)+j]
				row.runs = append(row.runs, run)
				row.requests += run.requests
				row.failed += run.failed
				row.worst = max(row.worst, run.failed)
				row.warmFailed += run.warmFailed
				row.attempts += run.attempts
			}
		}
	}
	r.took = time.Since(began)
	return r, nil
}

// runBlipOnce runs variant v with policy p and callers callers on a fresh
// server and a fresh Transport (and, for the defaults, a fresh budget).
func runBlipOnce(ctx context.Context, v blipVariant, p policy, callers int) (blipRun, error) {
	bs := &blipServer{}
	srv, err := startServer(bs.serve, time.Now(), time.Second, 1)
	if err != nil {
		return blipRun{}, err
	}
	defer srv.close()
	base := newBase()
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: p.transport(base, 1), Timeout: blipTimeout}

	var run blipRun
	if v.warm {
		run.warmFailed = countFailed(callers, 1, func() error { return get(ctx, c, srv.URL) })
		if err := sleep(ctx, blipSettle); err != nil {
			return run, err
		}
	}
	bs.Arm()
	var last atomic.Int64 // Unix nanoseconds of the last request's end
	run.failed = countFailed(callers, v.gets, func() error {
		err := get(ctx, c, srv.URL)
		end := time.Now().UnixNano()
		for {
			l := last.Load()
			if end <= l || last.CompareAndSwap(l, end) {
				return err
			}
		}
	})
	run.requests = callers * v.gets
	srv.close()
	run.attempts = bs.Arrivals.Load()
	run.drain = blipNoDrain
	if from := bs.Start(); !from.IsZero() {
		run.drain = time.Unix(0, last.Load()).Sub(from.Add(blipLength))
	}
	return run, nil
}

// scaledBlipRuns is blipDefault scaled by s, at least 1.
func scaledBlipRuns(s float64) int {
	return max(1, int(math.Round(blipDefault*s)))
}

// countFailed runs callers goroutines, each calling do gets times one
// after the other, and returns how many calls failed.
func countFailed(callers, gets int, do func() error) int {
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range gets {
				if do() != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

// drains returns the drains of the row's runs that had a blip, sorted.
func (row blipRow) drains() []time.Duration {
	var d []time.Duration
	for _, run := range row.runs {
		if run.drain != blipNoDrain {
			d = append(d, run.drain)
		}
	}
	slices.Sort(d)
	return d
}

// blipSection turns the result into the report's section.
func blipSection(r blipResult) section {
	s := section{
		id:    "blip",
		title: "A worker pool through a blip: its host answers 503 for 300ms",
		notes: []string{
			fmt.Sprintf("%d callers (goroutines) share one Transport per row. The server answers 200 (after %v) but for %v "+
				"from the first request after the blip is armed: 503 at once, no Retry-After.", r.callers, blipWork, blipLength),
			fmt.Sprintf("warm: each caller first does one successful GET, then the blip is armed and each caller sends %d GETs, one "+
				"after the other. cold: a fresh Transport (and, for the defaults, a fresh budget) whose first requests meet the "+
				"blip, one GET per caller.", blipVariants[0].gets),
			fmt.Sprintf("Each variant is run %s (-runs); every run of every row has a fresh server and Transport, and the rows of a "+
				"run go side by side. Failed: requests that did not end in a 200, over all runs, and the most in one run.", plural(r.runs, "time")),
			"Last answer after the blip: from the blip's end until the last request of the run ended (how fast retries waiting " +
				"for the host drain once it answers), the median and the worst of the runs.",
			fmt.Sprintf("Real time at any -timescale: the retry budget's own times are not scaled. The scenario took %v.",
				r.took.Round(100*time.Millisecond)),
		},
		header: []string{"variant", "policy", "requests", "failed", "worst run", "attempts per request", "last answer after the blip (median, worst)"},
	}
	if r.scale < 1 {
		s.notes = append(s.notes, fmt.Sprintf("Scaled down to %.3g of the default run's sizes (-clients/200 × -duration/4s): "+
			"%d callers instead of %d (at least %d); without -runs, %s of each variant instead of %d.",
			r.scale, r.callers, blipCallers, blipMinCallers, plural(scaledBlipRuns(r.scale), "run"), blipDefault))
	}
	var attempts, finish []bar
	for _, row := range r.rows {
		label := row.variant.name + ", " + row.policy.name
		perRequest := float64(row.attempts) / float64(max(row.requests, 1))
		attempts = append(attempts, bar{label: label, value: perRequest, policy: row.policy.name})
		drain := "—"
		if d := row.drains(); len(d) > 0 {
			drain = fmt.Sprintf("%s, %s", ms(d[len(d)/2]), ms(d[len(d)-1]))
			finish = append(finish, bar{label: label, value: float64(d[len(d)/2]) / float64(time.Millisecond), policy: row.policy.name})
		}
		cells := []string{
			row.variant.name, row.policy.name, fmt.Sprint(row.requests), fmt.Sprint(row.failed), fmt.Sprint(row.worst),
			fmt.Sprintf("%.2f", perRequest), drain,
		}
		if row.warmFailed > 0 {
			cells[3] += fmt.Sprintf(" (and %d of the warm-up)", row.warmFailed)
		}
		s.rows = append(s.rows, cells)
	}
	s.policies = closedLoopPolicies()
	s.charts = []chart{
		{file: "blip.svg", svg: barChart{
			title: "A worker pool through a blip: attempts at the server per request", xLabel: "attempts per request",
			bars: attempts, linear: true,
		}.svg()},
		{file: "blip-finish.svg", svg: barChart{
			title:  "A worker pool through a blip: last answer after the blip (median of the runs)",
			xLabel: "ms from the blip's end to the run's last answer", bars: finish, linear: true,
		}.svg()},
	}
	return s
}
