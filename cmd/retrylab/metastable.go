package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Metastable scenario, model times.
const (
	metaPeriod      = 500 * time.Millisecond // each client sends a request this often
	metaWork        = 20 * time.Millisecond  // a worker's time per request
	metaUtilization = 0.8                    // offered load over capacity
	metaQueue       = 500 * time.Millisecond // of work the queue holds
	metaShedCost    = 2 * time.Millisecond   // of work per shed request
	metaAttempt     = 250 * time.Millisecond // each attempt's timeout (WithAttemptTimeout)
	metaTrigger     = time.Second            // the capacity halves this long
	metaWindow      = time.Second            // useful responses are counted over this much, for recovery
	metaRecovered   = 0.9                    // share of the offered load answered usefully, for recovery
	metaLoadFactor  = 2                      // the load lasts this many times -duration
)

// metaRow is the result of one policy in the metastable scenario.
type metaRow struct {
	policy        policy
	sum           summary
	attempts      int64
	amplification float64
	shed          int64
	usefulAfter   float64       // useful responses per second from the trigger's end to the load's end
	recovery      time.Duration // until useful responses held at metaRecovered of the offered load
	recovered     bool
	settle        time.Duration // real time (settled): every caller served again
	settledIn     bool
	useful        []float64 // useful responses per 100ms at the server
	arrived       []float64 // requests per 100ms at the server
	check         machineCheck
}

// metaResult is the metastable scenario's outcome.
type metaResult struct {
	rows                 []metaRow
	clients, workers     int
	queue                int           // places
	offered              float64       // client requests per second
	capRate              float64       // requests per second the server can serve
	duration             time.Duration // of the load
	buckets              int           // of the load
	triggerFrom, trigger int           // buckets: the trigger's first, and its length
}

// triggerTo returns the bucket of the trigger's end.
func (r metaResult) triggerTo() int { return r.triggerFrom + r.trigger }

// runMetastable runs the metastable overload: a server running at 80% of its
// capacity, with a queue, that works on requests whose clients left; its
// capacity halves for a second (the trigger). Without retries it recovers
// when the trigger ends; with retries that feed it work faster than it can
// do, it may not: a metastable failure. Each policy gets a fresh server and
// fresh clients.
//
// The load lasts twice -duration (8s by default), so that the run shows
// both the trigger and what follows it: the trigger starts at 3/16 of the
// load (1.5s) and lasts 1s, or an eighth of the load if shorter.
func runMetastable(ctx context.Context, cfg config) (metaResult, error) {
	d := metaLoadFactor * cfg.duration
	nb := int(d / bucketWidth)
	offered := float64(cfg.clients) / metaPeriod.Seconds()
	workers := max(1, int(math.Round(offered/metaUtilization*metaWork.Seconds())))
	capRate := float64(workers) / metaWork.Seconds()
	r := metaResult{
		clients: cfg.clients, workers: workers, offered: offered, capRate: capRate,
		queue:    max(1, int(math.Round(metaQueue.Seconds()*capRate))),
		duration: d, buckets: nb, triggerFrom: nb * 3 / 16, trigger: min(int(metaTrigger/bucketWidth), nb/8),
	}
	reruns := cfg.reruns(len(metastablePolicies()))
	for _, p := range metastablePolicies() {
		row, runs, err := untilCalm(ctx, &reruns, func() (metaRow, error) { return metaRun(ctx, cfg, r, p) },
			func(row metaRow) machineCheck { return row.check })
		if err != nil {
			return r, err
		}
		row.check.runs = runs
		r.rows = append(r.rows, row)
	}
	return r, nil
}

// metaRun runs one policy of the metastable scenario.
func metaRun(ctx context.Context, cfg config, r metaResult, p policy) (metaRow, error) {
	width := cfg.scale(bucketWidth)
	start := time.Now().Add(cfg.scale(20 * time.Millisecond))
	from, to := start.Add(time.Duration(r.triggerFrom)*width), start.Add(time.Duration(r.triggerTo())*width)
	q := newQueueServer(r.workers, r.queue, cfg.scale(metaWork), cfg.scale(metaShedCost),
		func(t time.Time) bool { return !t.Before(from) && t.Before(to) },
		start, width, r.buckets+loadTail)
	defer q.close()
	run, err := runLoad(ctx, cfg, p, load{
		handler: q.serve, start: start, buckets: r.buckets, period: metaPeriod, duration: r.duration,
		extra: []retryhttp.Option{retryhttp.WithAttemptTimeout(cfg.scale(metaAttempt))},
	})
	if err != nil {
		return metaRow{}, err
	}
	defer run.srv.close()
	row := metaRow{
		policy: p, sum: cfg.summarize(run.outcomes), attempts: run.srv.requests.Load(), shed: q.shedded.Load(),
		check: run.check,
	}
	row.amplification = float64(row.attempts) / float64(max(row.sum.requests, 1))
	row.arrived, _ = run.srv.series(r.buckets + loadTail)
	row.useful = run.srv.usefulSeries(r.buckets + loadTail)
	row.check.capacity = q.capacity(r.buckets)
	row.recovery, row.recovered = recovery(row.useful[:r.buckets], r.triggerTo(), r.offered*bucketWidth.Seconds())
	row.settle, row.settledIn = settled(run.outcomes, time.Duration(r.triggerTo())*width, cfg.scale(metaPeriod), cfg.scale(r.duration))
	after := 0.0
	for _, v := range row.useful[r.triggerTo():r.buckets] {
		after += v
	}
	row.usefulAfter = after / (time.Duration(r.buckets-r.triggerTo()) * bucketWidth).Seconds()
	return row, nil
}

// recovery returns how long after bucket from the useful responses per
// bucket (useful) reached metaRecovered of the offered load per bucket
// (offered) for good: the start of the first window of metaWindow from which
// on every window, to the end of useful, has them. It reports false if none
// did. A window spans two periods of every client, so that the phases of
// the clients do not matter and a short stall of the machine does not undo a
// recovery; the price is that a recovery may be dated up to one bucket early
// (a window with one bucket of the outage still passes).
func recovery(useful []float64, from int, offered float64) (time.Duration, bool) {
	w := int(metaWindow / bucketWidth)
	want := metaRecovered * offered * float64(w)
	at := -1
	for i := len(useful) - w; i >= from; i-- {
		sum := 0.0
		for _, v := range useful[i : i+w] {
			sum += v
		}
		if sum < want {
			break
		}
		at = i
	}
	if at < 0 {
		return 0, false
	}
	return time.Duration(at-from) * bucketWidth, true
}

// metaSection turns the result into the report's section.
func metaSection(r metaResult, cfg config) section {
	trigFrom := time.Duration(r.triggerFrom) * bucketWidth
	trigTo := time.Duration(r.triggerTo()) * bucketWidth
	s := section{
		id:    "metastable",
		title: "Metastable overload: the trigger ends, do the retries keep the server down?",
		notes: []string{
			fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v: %.0f requests/s offered. "+
				"Each attempt times out after %v (WithAttemptTimeout); clients give up after %v.",
				r.clients, metaPeriod, r.duration, r.offered, metaAttempt, clientLimit),
			fmt.Sprintf("The server: %s, %v per request (%.0f requests/s, offered load at %s), behind a FIFO queue of %d places "+
				"(%v of work). Queued requests are worked on even after their client left. A request finding the queue full "+
				"is shed with 503 (no Retry-After), which costs the workers %v of work.",
				plural(r.workers, "worker"), metaWork, r.capRate, pct(r.offered/r.capRate), r.queue, metaQueue, metaShedCost),
			fmt.Sprintf("Trigger: from %v to %v the server's capacity is halved (%v per request).", trigFrom, trigTo, 2*metaWork),
			fmt.Sprintf("Useful: a 200 written while its client was still waiting. Useful/s after: from the trigger's end (%v) to the "+
				"load's end (%v). Useful ≥%s after: from then on, every %v window had useful responses for at least %s of the offered load. "+
				"Recovered after: until every request sent before the trigger's end has its answer (the backlog is drained) and every request sent from then on succeeds.",
				trigTo, r.duration, fmt.Sprintf("%.0f%%", 100*metaRecovered), metaWindow, fmt.Sprintf("%.0f%%", 100*metaRecovered)),
			"The seed fixes the clients' phases, not the scheduling of goroutines on this machine: times vary by a few hundred ms from run to run.",
		},
		header: []string{"policy", "requests", "server hits", "amplification", "shed", "success",
			"useful/s after (of offered)", "useful ≥" + fmt.Sprintf("%.0f%%", 100*metaRecovered) + " after", "recovered after", "p99", "machine"},
	}
	s.notes = append(s.notes, cfg.scaleNote()...)
	var checks []machineCheck
	var names []string
	var useful, arrived []line
	per100 := 1 / bucketWidth.Seconds()
	for _, row := range r.rows {
		rec := "not in run"
		if row.recovered {
			rec = row.recovery.String()
		}
		s.rows = append(s.rows, []string{
			row.policy.name, fmt.Sprint(row.sum.requests), fmt.Sprint(row.attempts),
			fmt.Sprintf("%.2f×", row.amplification), fmt.Sprint(row.shed), pct(row.sum.success),
			fmt.Sprintf("%.0f (%.0f%%)", row.usefulAfter, 100*row.usefulAfter/r.offered), rec,
			settledCell(cfg, row.settle, row.settledIn), ms(row.sum.p99), row.check.cell(),
		})
		s.policies = append(s.policies, row.policy)
		checks, names = append(checks, row.check), append(names, row.policy.name)
		perSec := make([]float64, len(row.useful))
		for i, v := range row.useful {
			perSec[i] = v * per100
		}
		note := fmt.Sprintf("%.0f useful/s after the trigger; never ≥%.0f%% useful in the run", row.usefulAfter, 100*metaRecovered)
		if row.recovered {
			note = fmt.Sprintf("%.0f useful/s after the trigger; ≥%.0f%% useful after %v", row.usefulAfter, 100*metaRecovered, row.recovery)
		}
		l := line{name: row.policy.name, ys: perSec, note: note}
		if row.recovered {
			l.mark = (trigTo + row.recovery).Seconds()
		}
		useful = append(useful, l)
		arrived = append(arrived, line{name: row.policy.name, ys: row.arrived})
	}
	s.addMachineChecks(cfg, checks, names, "times and rates")
	trigger := band{from: trigFrom.Seconds(), to: trigTo.Seconds(), label: "capacity halved"}
	s.charts = []chart{
		{
			file: "metastable.svg",
			svg: lineChart{
				title:  "Metastable overload: useful responses per second (dashed: useful ≥" + fmt.Sprintf("%.0f%%", 100*metaRecovered) + " of offered from then on)",
				xLabel: "time (s)", yLabel: "useful responses per second",
				dx:    bucketWidth.Seconds(),
				lines: useful,
				bands: []band{trigger},
				hlines: []hline{
					{y: r.capRate, label: "capacity"},
					{y: r.offered, label: "offered"},
				},
			}.svg(),
		},
		{
			file: "metastable-load.svg",
			svg: lineChart{
				title:  "Metastable overload: requests per 100ms at the server",
				xLabel: "time (s)", yLabel: "requests per 100ms",
				dx:    bucketWidth.Seconds(),
				lines: arrived,
				bands: []band{trigger},
				hlines: []hline{
					{y: r.capRate * bucketWidth.Seconds(), label: "capacity"},
				},
			}.svg(),
		},
	}
	return s
}
