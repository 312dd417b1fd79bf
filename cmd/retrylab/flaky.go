package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Flaky scenario, model times.
const (
	flakyPeriod = 500 * time.Millisecond // each client sends a request this often
	flakyRate   = 0.3                    // share of requests failed, at random
	flakyWaits  = 0.1                    // waits are scaled by this, besides the timescale
)

// flakyRow is the result of one policy in the flaky scenario.
type flakyRow struct {
	policy        policy
	sum           summary
	attempts      int64
	amplification float64
	refused       int64     // requests that ended on a retry the budget refused
	arrived       []float64 // requests per 100ms at the server
	check         machineCheck
}

// flakyResult is the flaky scenario's outcome.
type flakyResult struct {
	rows     []flakyRow
	clients  int
	duration time.Duration // of the load
	buckets  int
}

// runFlaky runs a host that fails 30% of requests at random (503 at once,
// drawn from the seed), whatever its load: retries there do not feed an
// overload, and every one has a 70% chance. Each policy gets a fresh server
// and fresh clients. The load lasts a quarter of -duration (1s by default:
// 400 requests).
func runFlaky(ctx context.Context, cfg config) (flakyResult, error) {
	d := max(cfg.duration/4, flakyPeriod)
	r := flakyResult{clients: cfg.clients, duration: d, buckets: int(d / bucketWidth)}
	for _, p := range metastablePolicies() {
		row, err := flakyRun(ctx, cfg, r, p, randomFailures(cfg.seed))
		if err != nil {
			return r, err
		}
		r.rows = append(r.rows, row)
	}
	return r, nil
}

// randomFailures returns a fails function for flakyRun that fails
// flakyRate of the requests, drawn at random from seed.
func randomFailures(seed uint64) func() bool {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0xf1a4))
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64() < flakyRate
	}
}

// flakyRun runs one policy of a host that fails the requests for which
// fails reports true, at once with 503, and answers the others with 200:
// the flaky scenario, and the bad replica's.
func flakyRun(ctx context.Context, cfg config, r flakyResult, p policy, fails func() bool) (flakyRow, error) {
	h := handlerFunc(func(w http.ResponseWriter, _ *http.Request) int {
		if fails() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return http.StatusServiceUnavailable
		}
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	})
	start := time.Now().Add(cfg.scale(20 * time.Millisecond))
	run, err := runLoad(ctx, cfg, p, load{
		handler: h, start: start, buckets: r.buckets, period: flakyPeriod, duration: r.duration, waitScale: flakyWaits,
	})
	if err != nil {
		return flakyRow{}, err
	}
	defer run.srv.close()
	row := flakyRow{policy: p, sum: cfg.summarize(run.outcomes), attempts: run.srv.requests.Load(), check: run.check,
		refused: run.refused}
	row.amplification = float64(row.attempts) / float64(max(row.sum.requests, 1))
	row.arrived, _ = run.srv.series(r.buckets + loadTail)
	return row, nil
}

// flakySection turns the result into the report's section.
func flakySection(r flakyResult, cfg config) section {
	s := section{
		id:    "flaky",
		title: "Flaky host: 30% of requests fail at random, whatever the load",
		notes: []string{
			fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v; the server answers %s of requests, "+
				"drawn at random, with 503 at once, and the others with 200.", r.clients, flakyPeriod, r.duration, pct(flakyRate)),
			"Retries cannot hurt this server and each has a 70% chance: the question is what each policy spends. " +
				"Without a budget, 3 retries cost 1 + 0.3 + 0.09 + 0.027 = 1.42 attempts per request, for 99.2% success.",
			"Refused: requests that ended on a retry the retry budget refused (StopBudgetRefused); the other failures used all their attempts.",
			fmt.Sprintf("Waits are scaled ×%g (retryhttp's 250ms base becomes %v) so that the run takes seconds.",
				flakyWaits, time.Duration(float64(250*time.Millisecond)*flakyWaits)),
		},
		header: []string{"policy", "requests", "server hits", "amplification", "success", "refused", "p50", "p99"},
	}
	s.notes = append(s.notes, cfg.scaleNote()...)
	var checks []machineCheck
	var names []string
	for _, row := range r.rows {
		s.rows = append(s.rows, []string{
			row.policy.name, fmt.Sprint(row.sum.requests), fmt.Sprint(row.attempts),
			fmt.Sprintf("%.2f×", row.amplification), pct(row.sum.success), fmt.Sprint(row.refused), ms(row.sum.p50), ms(row.sum.p99),
		})
		s.policies = append(s.policies, row.policy)
		checks, names = append(checks, row.check), append(names, row.policy.name)
	}
	s.addMachineChecks(cfg, checks, names, "latencies (not their counts, which do not depend on timing)")
	s.charts = []chart{{file: "flaky.svg", svg: flakyChart(r, "Flaky host (30% fail at random): requests per 100ms at the server")}}
	return s
}

// flakyChart draws the requests per 100ms at the server of each row.
func flakyChart(r flakyResult, title string) []byte {
	lines := make([]line, 0, len(r.rows))
	for _, row := range r.rows {
		lines = append(lines, line{name: row.policy.name, ys: row.arrived, note: fmt.Sprintf("%.2f× attempts, %s success", row.amplification, pct(row.sum.success))})
	}
	return lineChart{
		title:  title,
		xLabel: "time (s)", yLabel: "requests per 100ms",
		dx:    bucketWidth.Seconds(),
		lines: lines,
		hlines: []hline{
			{y: float64(r.clients) / flakyPeriod.Seconds() * bucketWidth.Seconds(), label: "requests sent"},
		},
	}.svg()
}
