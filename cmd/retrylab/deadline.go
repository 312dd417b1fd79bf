package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
)

// Deadline scenario, model times: a chain client → S1 → S2 of Go services,
// each using retryhttp's transport and package inbound's middleware, where
// S2 loses half its capacity for a while. Without deadlines that travel, S2
// starts work for callers who will have gone before it ends; with them
// (WithDeadlineHeader, inbound.Deadline), its LoadShedder refuses that work.
const (
	dlPeriod      = 500 * time.Millisecond // each client sends a request this often
	dlWork        = 20 * time.Millisecond  // S2's work per request, not interruptible
	dlUtilization = 0.75                   // offered load over S2's capacity
	dlDeadline    = 250 * time.Millisecond // a client's patience, per request
	dlQueueWait   = time.Second            // S2's LoadShedder MaxQueueWait
	dlTriggerFrom = 1500 * time.Millisecond
	dlTrigger     = time.Second // S2's work doubles this long
	dlLoadFactor  = 2           // the load lasts this many times -duration
	dlIDHeader    = "Lab-Request"
)

// deadlineRow is the result of one chain, with or without propagation.
type deadlineRow struct {
	name        string
	propagate   bool
	sum         summary
	work        time.Duration // S2's work, all of it
	wasted      time.Duration // of which done for callers who had gone
	after       float64       // share of the requests sent after the trigger that succeeded
	late        uint64        // S2's LoadShedder refusals for a deadline
	shed        uint64        // all its refusals
	s2Requests  int64
	wastedShare float64
	wasted100   []float64 // S2's wasted work per bucket, in ms of model time, by the time it ended
}

// deadlineResult is the deadline scenario's outcome.
type deadlineResult struct {
	rows             []deadlineRow
	clients, workers int
	offered          float64
	duration         time.Duration
}

// runDeadline runs the chain without and with deadline propagation, each on
// fresh servers and clients.
func runDeadline(ctx context.Context, cfg config) (deadlineResult, error) {
	offered := float64(cfg.clients) / dlPeriod.Seconds()
	r := deadlineResult{
		clients: cfg.clients, offered: offered, duration: dlLoadFactor * cfg.duration,
		workers: max(1, int(math.Round(offered/dlUtilization*dlWork.Seconds()))),
	}
	for _, propagate := range []bool{false, true} {
		row := deadlineRun(ctx, cfg, r, propagate)
		if err := ctx.Err(); err != nil {
			return r, err
		}
		r.rows = append(r.rows, row)
	}
	return r, nil
}

// deadlineChain is one chain's servers and what S2 measured.
type deadlineChain struct {
	ended        []atomic.Bool  // by request id: the client's request has ended
	work, wasted atomic.Int64   // S2's, ns
	wasted100    []atomic.Int64 // wasted, per bucket
	start        time.Time
	width        time.Duration // of a bucket
	shedder      *inbound.LoadShedder
	s1, s2       *httptest.Server
	toS2         http.RoundTripper
	base         *http.Transport // toS2's
}

func (c *deadlineChain) close() {
	c.s1.Close()
	c.s2.Close()
	c.base.CloseIdleConnections()
}

// deadlineTransport is the transport of the client and of S1: retryhttp's
// defaults, waits scaled, the header sent with propagate.
func deadlineTransport(cfg config, base http.RoundTripper, propagate bool) http.RoundTripper {
	return newTransport(nil, retryhttp.WithTransport(base), scaled(nil, cfg.timescale), retryhttp.WithDeadlineHeader(propagate))
}

// deadlineRun runs one chain.
func deadlineRun(ctx context.Context, cfg config, r deadlineResult, propagate bool) deadlineRow {
	start := time.Now().Add(cfg.scale(20 * time.Millisecond))
	from, to := start.Add(cfg.scale(dlTriggerFrom)), start.Add(cfg.scale(dlTriggerFrom+dlTrigger))
	c := newDeadlineChain(cfg, r, propagate, func(t time.Time) bool { return !t.Before(from) && t.Before(to) })
	c.start, c.width = start, cfg.scale(bucketWidth)
	defer c.close()

	base := newBase()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: deadlineTransport(cfg, base, propagate)}
	var ids atomic.Int64
	var sentAfter, okAfter atomic.Int64
	outcomes := drive(ctx, start, r.clients, cfg.scale(dlPeriod), cfg.scale(r.duration), cfg.seed,
		func(ctx context.Context, _ int) bool {
			id := ids.Add(1) - 1
			after := !time.Now().Before(to)
			ctx, cancel := context.WithTimeout(ctx, cfg.scale(dlDeadline))
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.s1.URL, nil)
			req.Header.Set(dlIDHeader, strconv.FormatInt(id, 10))
			ok := do(client, req)
			if id < int64(len(c.ended)) {
				c.ended[id].Store(true)
			}
			if after {
				sentAfter.Add(1)
				if ok {
					okAfter.Add(1)
				}
			}
			return ok
		})
	row := deadlineRow{
		name: "without propagation", propagate: propagate, sum: cfg.summarize(outcomes),
		work: cfg.model(time.Duration(c.work.Load())), wasted: cfg.model(time.Duration(c.wasted.Load())),
		after: float64(okAfter.Load()) / float64(max(sentAfter.Load(), 1)),
	}
	if propagate {
		row.name = "with propagation"
	}
	st := c.shedder.Stats()
	row.late, row.shed, row.s2Requests = st.Late, st.Shed, int64(st.Admitted+st.Shed)
	row.wastedShare = float64(row.wasted) / float64(max(row.work, 1))
	for i := range c.wasted100 {
		row.wasted100 = append(row.wasted100, float64(cfg.model(time.Duration(c.wasted100[i].Load())))/float64(time.Millisecond))
	}
	return row
}

// newDeadlineChain starts S2 and S1. S2: LoadShedder (workers slots, a
// queue) around work that cannot be interrupted, doubled while trigger
// says so; S1: Pushback around a proxy to S2. With propagate, both are
// wrapped in inbound.Deadline and S1's transport sends the header.
func newDeadlineChain(cfg config, r deadlineResult, propagate bool, trigger func(time.Time) bool) *deadlineChain {
	c := &deadlineChain{
		ended:     make([]atomic.Bool, r.clients*(int(r.duration/dlPeriod)+2)),
		wasted100: make([]atomic.Int64, int(r.duration/bucketWidth)+1),
		shedder: inbound.NewLoadShedder(inbound.LoadShedderOptions{
			Limit: r.workers, MaxQueue: 100 * r.workers, MaxQueueWait: cfg.scale(dlQueueWait),
		}),
		base: newBase(),
	}
	c.toS2 = deadlineTransport(cfg, c.base, propagate)
	wrap := func(h http.Handler) http.Handler {
		if propagate {
			return inbound.Deadline(h)
		}
		return h
	}
	c.s2 = httptest.NewServer(wrap(c.shedder.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		work := cfg.scale(dlWork)
		if trigger(time.Now()) {
			work *= 2
		}
		time.Sleep(work) // the service's work: it does not look at the context
		c.work.Add(int64(work))
		if id, err := strconv.Atoi(r.Header.Get(dlIDHeader)); err == nil && id < len(c.ended) && c.ended[id].Load() {
			c.wasted.Add(int64(work))
			if i := int(time.Since(c.start) / c.width); i >= 0 && i < len(c.wasted100) {
				c.wasted100[i].Add(int64(work))
			}
		}
	}))))
	c.s1 = httptest.NewServer(wrap(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, c.s2.URL, nil)
		req.Header.Set(dlIDHeader, r.Header.Get(dlIDHeader))
		res, err := c.toS2.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for _, k := range []string{retryhttp.RetrySignalHeader, "Retry-After"} {
			if v := res.Header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	}))))
	return c
}

// do sends req through c and reports whether it got a 200 whose body was
// read to the end.
func do(c *http.Client, req *http.Request) bool {
	res, err := c.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return err == nil && res.StatusCode == http.StatusOK
}

// deadlineSection turns the result into the report's section.
func deadlineSection(r deadlineResult, cfg config) section {
	s := section{
		id:    "deadline",
		title: "Deadlines that travel: client → S1 → S2, S2's capacity halved for a while",
		notes: []string{
			fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v: %.0f requests/s offered; each gives up after %v.",
				r.clients, dlPeriod, r.duration, r.offered, dlDeadline),
			fmt.Sprintf("S2: %d slots of inbound.LoadShedder (offered load at %s of capacity), a queue of up to %v, and %v of work per request "+
				"that does not look at its context; from %v to %v the work doubles. S1: inbound.Pushback around a proxy to S2.",
				r.workers, pct(dlUtilization), dlQueueWait, dlWork, dlTriggerFrom, dlTriggerFrom+dlTrigger),
			"Wasted: S2's work on requests whose client had already stopped waiting when it ended. After: the requests sent from the trigger's end that succeeded.",
			"With propagation: every transport sends retryhttp.DeadlineHeader (WithDeadlineHeader), S1 and S2 are wrapped in inbound.Deadline.",
		},
		header: []string{"chain", "requests", "success", "S2 requests", "S2 refused (late)", "S2 work", "wasted", "after the trigger", "p99"},
	}
	s.notes = append(s.notes, cfg.scaleNote()...)
	var lines []line
	for _, row := range r.rows {
		lines = append(lines, line{name: row.name, ys: row.wasted100, note: pct(row.wastedShare) + " of S2's work wasted"})
		s.rows = append(s.rows, []string{
			row.name, fmt.Sprint(row.sum.requests), pct(row.sum.success), fmt.Sprint(row.s2Requests),
			fmt.Sprintf("%d (%d)", row.shed, row.late), row.work.Round(time.Millisecond).String(),
			pct(row.wastedShare), pct(row.after), ms(row.sum.p99),
		})
	}
	s.charts = []chart{{
		file: "deadline.svg",
		svg: lineChart{
			title:  "Deadlines that travel: S2's work for callers who had gone, per 100ms",
			xLabel: "time (s)", yLabel: "wasted work (ms per 100ms)",
			dx:    bucketWidth.Seconds(),
			lines: lines,
			bands: []band{{from: dlTriggerFrom.Seconds(), to: (dlTriggerFrom + dlTrigger).Seconds(), label: "S2's capacity halved"}},
		}.svg(),
	}}
	return s
}
