package main

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Overload scenario, model times.
const (
	overloadPeriod = 500 * time.Millisecond // each client sends a request this often
	overloadWork   = 20 * time.Millisecond  // the server's time per request
	overloadFactor = 1.6                    // offered load over capacity
	retryAfterSecs = 1                      // the Retry-After of a shed request
)

// overloadRow is the result of one policy in the overload scenario.
type overloadRow struct {
	policy        policy
	sum           summary
	attempts      int64
	tries         [maxTry]tries // of those, by attempt number
	gaveUp        int           // requests whose client gave up (http.Client.Timeout)
	amplification float64       // attempts per client request
	goodput       float64       // 200s per second at the server, while the load ran
	arrived       []float64     // requests per 100ms at the server
	check         machineCheck
}

// overloadResult is the overload scenario's outcome.
type overloadResult struct {
	rows     []overloadRow
	capacity int     // concurrent requests the server handles
	capRate  float64 // requests per second it can serve
	offered  float64 // client requests per second
	buckets  int
	clients  int
}

// runOverload offers a server 1.6 times the load it can serve, for the whole
// run: it handles a fixed number of requests at once and sheds the excess with
// 503 and Retry-After: 1. Each policy gets a fresh server and fresh clients.
func runOverload(ctx context.Context, cfg config) (overloadResult, error) {
	offered := float64(cfg.clients) / overloadPeriod.Seconds()
	capacity := max(1, int(math.Round(offered/overloadFactor*overloadWork.Seconds())))
	r := overloadResult{
		capacity: capacity, capRate: float64(capacity) / overloadWork.Seconds(), offered: offered,
		buckets: int(cfg.duration / bucketWidth), clients: cfg.clients,
	}
	reruns := cfg.reruns(len(overloadPolicies()))
	for _, p := range overloadPolicies() {
		row, runs, err := untilCalm(ctx, &reruns, func() (overloadRow, error) { return overloadRun(ctx, cfg, r, p) },
			func(row overloadRow) machineCheck { return row.check })
		if err != nil {
			return r, err
		}
		row.check.runs = runs
		r.rows = append(r.rows, row)
	}
	return r, nil
}

// overloadRun runs one policy of the overload scenario.
func overloadRun(ctx context.Context, cfg config, r overloadResult, p policy) (overloadRow, error) {
	start := time.Now().Add(cfg.scale(20 * time.Millisecond))
	h := &capacityHandler{capacity: int64(r.capacity), work: cfg.scale(overloadWork), retryAfter: retryAfterSecs}
	run, err := runLoad(ctx, cfg, p, load{handler: h.serve, start: start, buckets: r.buckets, period: overloadPeriod, duration: cfg.duration})
	if err != nil {
		return overloadRow{}, err
	}
	srv, outcomes := run.srv, run.outcomes
	defer srv.close()
	arrived, _ := srv.series(r.buckets + loadTail)
	loadArrived, loadFailed := srv.series(r.buckets)
	served := 0.0
	for i := range loadArrived {
		served += loadArrived[i] - loadFailed[i]
	}
	row := overloadRow{policy: p, sum: cfg.summarize(outcomes), attempts: srv.requests.Load(), tries: srv.tries(), arrived: arrived}
	row.gaveUp = gaveUp(cfg, outcomes)
	row.amplification = float64(row.attempts) / float64(max(row.sum.requests, 1))
	row.goodput = served / cfg.duration.Seconds()
	row.check = run.check
	return row, nil
}

// overloadSection turns the result into the report's section.
func overloadSection(r overloadResult, cfg config) section {
	s := section{
		id:    "overload",
		title: "Overload: offered load above capacity, excess shed with 503 + Retry-After",
		notes: []string{
			fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v: %.0f requests/s offered.",
				r.clients, overloadPeriod, cfg.duration, r.offered),
			fmt.Sprintf("The server handles %s at once, %v each: %.0f requests/s (offered load %.2f× capacity); "+
				"the excess gets 503 with Retry-After: %d at once.",
				plural(r.capacity, "request"), overloadWork, r.capRate, r.offered/r.capRate, retryAfterSecs),
			fmt.Sprintf("Goodput: 200s per second at the server while the load runs. Clients give up after %v.", clientLimit),
			"Shedding costs this server nothing, so retries cannot lower its goodput; they fill its idle moments, " +
				"raising success, at the price of the amplification. A real server pays for each request it sheds.",
		},
		header: []string{"policy", "requests", "server hits", "amplification", "goodput/s", "goodput/capacity", "success", "p50", "p99"},
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
			fmt.Sprintf("%.2f×", row.amplification), fmt.Sprintf("%.0f", row.goodput),
			pct(row.goodput / r.capRate), pct(row.sum.success), ms(row.sum.p50), ms(row.sum.p99),
		})
		s.policies = append(s.policies, row.policy)
		lines = append(lines, line{name: row.policy.name, ys: row.arrived})
	}
	per100 := bucketWidth.Seconds()
	s.charts = []chart{{
		file: "overload.svg",
		svg: lineChart{
			title:  "Overload: requests per 100ms at the server",
			xLabel: "time (s)", yLabel: "requests per 100ms",
			dx:    per100,
			lines: lines,
			bands: []band{{from: 0, to: cfg.duration.Seconds(), label: "offered load"}},
			hlines: []hline{
				{y: r.capRate * per100, label: "capacity"},
				{y: r.offered * per100, label: "offered"},
			},
		}.svg(),
	}}
	return s
}
