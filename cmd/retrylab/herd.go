package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Herd scenario, model times (multiplied by config.timescale when run).
const (
	bucketWidth  = 100 * time.Millisecond // the charts' resolution
	herdPeriod   = 500 * time.Millisecond // each client sends a request this often
	herdWork     = 10 * time.Millisecond  // the server's time per request
	herdHeadroom = 3                      // capacity over normal load
	clientLimit  = 2 * time.Second        // http.Client.Timeout of herd and overload clients
)

// herdRow is the result of one policy in the herd scenario.
type herdRow struct {
	policy        policy
	sum           summary
	attempts      int64         // requests the server received
	tries         [maxTry]tries // of those, by attempt number
	gaveUp        int           // requests whose client gave up (http.Client.Timeout)
	amplification float64       // attempts per client request
	peak          float64       // busiest 100ms over the normal load
	retryPeak     float64       // most retries in 100ms after the outage, over the normal load
	recovery      time.Duration // real time (settled)
	recovered     bool
	arrived       []float64 // requests per 100ms at the server
	check         machineCheck
}

// herdResult is the herd scenario's outcome.
type herdResult struct {
	rows                  []herdRow
	normal                float64 // requests per 100ms before the outage
	capacity              int     // concurrent requests the server handles
	outageFrom, outageTo  int     // buckets
	buckets               int     // of the load
	clients               int
	period, work, timeout time.Duration
}

// runHerd runs the thundering herd: cfg.clients clients each send a GET
// every 500ms to a server that can handle three times that load; for the
// middle three eighths of the run the server answers everything with 503 at
// once, then recovers. Each policy gets a fresh server and fresh clients.
func runHerd(ctx context.Context, cfg config) (herdResult, error) {
	nb := int(cfg.duration / bucketWidth)
	rate := float64(cfg.clients) / herdPeriod.Seconds()
	r := herdResult{
		outageFrom: nb / 4, outageTo: nb * 5 / 8, buckets: nb, clients: cfg.clients,
		capacity: max(2, int(math.Ceil(herdHeadroom*rate*herdWork.Seconds()))),
		period:   herdPeriod, work: herdWork, timeout: clientLimit,
	}
	reruns := cfg.reruns(len(stormPolicies()))
	for _, p := range stormPolicies() {
		row, runs, err := untilCalm(ctx, &reruns, func() (herdRow, error) { return herdRun(ctx, cfg, r, p) },
			func(row herdRow) machineCheck { return row.check })
		if err != nil {
			return r, err
		}
		row.check.runs = runs
		r.rows = append(r.rows, row)
	}
	// Normal load: the buckets before the outage, past the first period
	// (when every client has started).
	from := int(herdPeriod / bucketWidth)
	if from >= r.outageFrom {
		from = 0
	}
	var sum, n float64
	for _, row := range r.rows {
		for _, v := range row.arrived[from:r.outageFrom] {
			sum += v
			n++
		}
	}
	r.normal = sum / max(n, 1)
	for i := range r.rows {
		r.rows[i].finish(r)
	}
	return r, nil
}

// herdRun runs one policy of the herd scenario.
func herdRun(ctx context.Context, cfg config, r herdResult, p policy) (herdRow, error) {
	width := cfg.scale(bucketWidth)
	start := time.Now().Add(cfg.scale(20 * time.Millisecond))
	from, to := start.Add(time.Duration(r.outageFrom)*width), start.Add(time.Duration(r.outageTo)*width)
	h := &capacityHandler{
		capacity: int64(r.capacity), work: cfg.scale(herdWork),
		failing: func(t time.Time) bool { return !t.Before(from) && t.Before(to) },
	}
	run, err := runLoad(ctx, cfg, p, load{handler: h.serve, start: start, buckets: r.buckets, period: herdPeriod, duration: cfg.duration})
	if err != nil {
		return herdRow{}, err
	}
	srv, outcomes := run.srv, run.outcomes
	defer srv.close()
	arrived, _ := srv.series(r.buckets + loadTail)
	row := herdRow{policy: p, sum: cfg.summarize(outcomes), attempts: srv.requests.Load(), tries: srv.tries(), arrived: arrived}
	row.retryPeak = srv.retriedPeak(r.outageTo) // over the normal load in finish
	row.amplification = float64(row.attempts) / float64(max(row.sum.requests, 1))
	row.gaveUp = gaveUp(cfg, outcomes)
	row.check = run.check
	row.recovery, row.recovered = settled(outcomes, time.Duration(r.outageTo)*width, cfg.scale(herdPeriod), cfg.scale(cfg.duration))
	return row, nil
}

// finish computes what needs the normal load of the whole scenario.
func (row *herdRow) finish(r herdResult) {
	peak := 0.0
	for _, v := range row.arrived {
		peak = max(peak, v)
	}
	row.peak = peak / max(r.normal, 1)
	row.retryPeak /= max(r.normal, 1)
}

// newClients returns the http.Clients of a run, one per client: sharing one
// transport, or with one each if the policy says so.
func newClients(p policy, base http.RoundTripper, n int, waitScale float64, timeout time.Duration,
	extra []retryhttp.Option) []*http.Client {
	clients := make([]*http.Client, n)
	var shared http.RoundTripper
	for i := range clients {
		rt := shared
		if rt == nil || p.perClient {
			rt = p.transport(base, waitScale, extra...)
			shared = rt
		}
		clients[i] = &http.Client{Transport: rt, Timeout: timeout}
	}
	return clients
}

// herdSection turns the result into the report's section.
func herdSection(r herdResult, cfg config) section {
	s := section{
		id:    "herd",
		title: "Thundering herd: the server fails for a while, then recovers",
		notes: []string{
			fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v; normal load %.1f requests per 100ms.",
				r.clients, r.period, cfg.duration, r.normal),
			fmt.Sprintf("The server handles %s at once, %v each (%.0f per 100ms, %v× the normal load), and sheds the excess with 503.",
				plural(r.capacity, "request"), r.work, float64(r.capacity)*float64(bucketWidth)/float64(r.work), herdHeadroom),
			fmt.Sprintf("Outage: from %v to %v every request gets 503 at once. Clients give up after %v (http.Client.Timeout).",
				time.Duration(r.outageFrom)*bucketWidth, time.Duration(r.outageTo)*bucketWidth, r.timeout),
			"Retry peak: the most retries that arrived in 100ms after the outage, over the normal load.",
			"Recovered after: from the outage's end until every request sent before it has its answer (the backlog, parked retries included, is drained) and every request sent from then on succeeds.",
			"The seed fixes the clients' phases, not the scheduling of goroutines on this machine: times (recovery, latencies) vary by a few hundred ms from run to run; counts and ratios barely move.",
		},
		header: []string{"policy", "requests", "server hits", "amplification", "peak/normal", "retry peak/normal", "recovered after", "success", "p50", "p99"},
	}
	s.notes = append(s.notes, cfg.scaleNote()...)
	var checks []machineCheck
	var names []string
	for _, row := range r.rows {
		checks, names = append(checks, row.check), append(names, row.policy.name)
	}
	s.addMachineChecks(cfg, checks, names, "times and rates")
	lines := make([]line, 0, len(r.rows))
	for _, row := range r.rows {
		s.rows = append(s.rows, []string{
			row.policy.name, fmt.Sprint(row.sum.requests), fmt.Sprint(row.attempts),
			fmt.Sprintf("%.2f×", row.amplification), fmt.Sprintf("%.1f×", row.peak), fmt.Sprintf("%.1f×", row.retryPeak), settledCell(cfg, row.recovery, row.recovered),
			pct(row.sum.success), ms(row.sum.p50), ms(row.sum.p99),
		})
		s.policies = append(s.policies, row.policy)
		lines = append(lines, line{name: row.policy.name, ys: row.arrived})
	}
	s.charts = []chart{{
		file: "herd.svg",
		svg: lineChart{
			title:  "Thundering herd: requests per 100ms at the server",
			xLabel: "time (s)", yLabel: "requests per 100ms",
			dx:    bucketWidth.Seconds(),
			lines: lines,
			bands: []band{{
				from:  (time.Duration(r.outageFrom) * bucketWidth).Seconds(),
				to:    (time.Duration(r.outageTo) * bucketWidth).Seconds(),
				label: "outage (503)",
			}},
			hlines: []hline{{y: float64(r.capacity) * float64(bucketWidth) / float64(r.work), label: "capacity"}},
		}.svg(),
	}}
	return s
}
