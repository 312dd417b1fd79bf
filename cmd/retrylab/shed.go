package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/inbound"
)

// Shed scenario, model times. The server has a fixed number of workers and
// an unbounded queue in front of them; it does the work of every request it
// accepts, even for a caller that gave up waiting. Offered 1.6 times what
// it can serve, its queue grows until every request waits longer than its
// caller's timeout, and all its work is wasted. A inbound.LoadShedder in
// front refuses the excess at once instead.
const (
	shedPeriod  = 250 * time.Millisecond // each client sends a request this often
	shedWork    = 20 * time.Millisecond  // a worker's time per request
	shedFactor  = 1.6                    // offered load over capacity
	shedTimeout = 500 * time.Millisecond // http.Client.Timeout of the clients
)

// shedServerKind is what stands in front of the workers.
type shedServerKind struct {
	name string
	// shedder returns the shedder of a server with workers workers, whose
	// work takes work; nil: nothing stands in front.
	shedder func(workers int, work time.Duration) *inbound.LoadShedder
}

var shedKinds = []shedServerKind{
	{"no shedding", nil},
	// A fixed limit with a short queue: no worker waits for the next
	// arrival when one is done, and no request waits longer than two
	// requests' work.
	{"LoadShedder, fixed + queue", func(workers int, work time.Duration) *inbound.LoadShedder {
		return inbound.NewLoadShedder(inbound.LoadShedderOptions{
			Limit: workers, MaxQueue: workers, MaxQueueWait: 2 * work,
		})
	}},
	{"LoadShedder, adaptive", func(int, time.Duration) *inbound.LoadShedder {
		return inbound.NewLoadShedder(inbound.LoadShedderOptions{Adaptive: true})
	}},
}

// shedPolicies are the clients of the shed scenario: naive, and this
// library's defaults.
func shedPolicies() []policy {
	return []policy{immediatePolicy(), defaultsPolicy()}
}

// shedRow is the result of one policy against one kind of server.
type shedRow struct {
	policy        policy
	server        string
	limit         string // the shedder's limit at the end, "—" without one
	sum           summary
	attempts      int64
	tries         [maxTry]tries // of those, by attempt number
	shed          int64         // attempts refused by the shedder
	useful        int64         // attempts worked on and answered 200 to a caller still waiting
	wasted        int64         // attempts worked on for a caller that had gone
	abandoned     int64         // attempts still queued when the run ended
	amplification float64
	goodput       float64   // useful answers per second, while the load ran
	useful100     []float64 // useful answers per 100ms
}

// shedResult is the shed scenario's outcome.
type shedResult struct {
	rows     []shedRow
	workers  int
	capRate  float64 // requests per second the workers can serve
	offered  float64
	duration time.Duration // of the load, model time
	buckets  int
	clients  int
}

// runShed runs every client policy against every kind of server, for half
// of cfg.duration each, to keep the lab's default run short.
func runShed(ctx context.Context, cfg config) (shedResult, error) {
	offered := float64(cfg.clients) / shedPeriod.Seconds()
	workers := max(1, int(math.Round(offered/shedFactor*shedWork.Seconds())))
	duration := cfg.duration / 2
	r := shedResult{
		workers: workers, capRate: float64(workers) / shedWork.Seconds(), offered: offered,
		duration: duration, buckets: int(duration / bucketWidth), clients: cfg.clients,
	}
	for _, p := range shedPolicies() {
		for _, k := range shedKinds {
			row, err := shedRun(ctx, cfg, r, p, k)
			if err != nil {
				return r, err
			}
			r.rows = append(r.rows, row)
		}
	}
	return r, nil
}

// shedTail is the number of buckets counted after the load stops: the last
// requests' timeouts.
var shedTail = int((shedTimeout + 100*time.Millisecond) / bucketWidth)

// shedRun runs one policy against one kind of server.
func shedRun(ctx context.Context, cfg config, r shedResult, p policy, k shedServerKind) (shedRow, error) {
	pool := &workerPool{slots: make(chan struct{}, r.workers), work: cfg.scale(shedWork), quit: make(chan struct{})}
	var h http.Handler = http.HandlerFunc(pool.serve)
	var shedder *inbound.LoadShedder
	if k.shedder != nil {
		shedder = k.shedder(r.workers, cfg.scale(shedWork))
		h = shedder.Handler(h)
	}
	start := time.Now().Add(cfg.scale(20 * time.Millisecond))
	srv, err := startServer(statusOf(h), start, cfg.scale(bucketWidth), r.buckets+shedTail)
	if err != nil {
		return shedRow{}, err
	}
	base := newBase()
	defer base.CloseIdleConnections()
	clients := newClients(p, base, cfg.clients, cfg.timescale, cfg.scale(shedTimeout), nil)
	outcomes := drive(ctx, start, cfg.clients, cfg.scale(shedPeriod), cfg.scale(r.duration), cfg.seed,
		func(ctx context.Context, i int) bool { return get(ctx, clients[i], srv.URL) == nil })
	close(pool.quit) // the backlog of requests nobody waits for any more
	srv.close()

	row := shedRow{
		policy: p, server: k.name, limit: "—", sum: cfg.summarize(outcomes), attempts: srv.requests.Load(), tries: srv.tries(),
		useful: pool.useful.Load(), wasted: pool.wasted.Load(), abandoned: pool.abandoned.Load(),
	}
	if shedder != nil {
		st := shedder.Stats()
		row.shed, row.limit = int64(st.Shed), fmt.Sprint(st.Limit)
	}
	row.amplification = float64(row.attempts) / float64(max(row.sum.requests, 1))
	arrived, failed := srv.series(r.buckets + shedTail)
	row.useful100 = make([]float64, len(arrived))
	served := 0.0
	for i := range arrived {
		row.useful100[i] = arrived[i] - failed[i]
		if i < r.buckets {
			served += row.useful100[i]
		}
	}
	row.goodput = served / r.duration.Seconds()
	return row, nil
}

// workerPool is a server with a fixed number of workers and an unbounded
// queue: a request waits for a worker, holds it for work, and is then
// answered, whether or not its caller still waits. quit, closed at the end
// of a run, abandons the requests still queued.
type workerPool struct {
	slots chan struct{}
	work  time.Duration
	quit  chan struct{}

	useful, wasted, abandoned atomic.Int64
}

// take waits for a free worker and reports whether it got one: false if
// the run ended (quit) first. A worker free at once is taken even after the
// end: only a request that had to queue is abandoned. (A select over both
// would pick at random when both are ready.)
func (p *workerPool) take() bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case p.slots <- struct{}{}:
		return true
	case <-p.quit:
		return false
	}
}

func (p *workerPool) serve(w http.ResponseWriter, r *http.Request) {
	if !p.take() {
		p.abandoned.Add(1)
		return
	}
	time.Sleep(p.work) // paid in full: the worker does not look at the caller
	<-p.slots
	if r.Context().Err() != nil {
		p.wasted.Add(1) // nobody reads the answer
		return
	}
	p.useful.Add(1)
	w.WriteHeader(http.StatusOK)
}

// statusOf adapts h to the lab's server: the status it wrote, 0 if none.
func statusOf(h http.Handler) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) int {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		return sw.code
	}
}

// statusWriter records the status written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// shedSection turns the result into the report's section.
func shedSection(r shedResult, cfg config) section {
	s := section{
		id:    "shed",
		title: "Load shedding: a server that pays for the work it accepts, with and without inbound.LoadShedder",
		notes: []string{
			fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v: %.0f requests/s offered; clients give up after %v.",
				r.clients, shedPeriod, r.duration, r.offered, shedTimeout),
			fmt.Sprintf("The server has %s, %v per request: %.0f requests/s (offered load %.2f× capacity). "+
				"Requests wait for a worker in an unbounded queue and are worked on even after their caller gave up (wasted).",
				plural(r.workers, "worker"), shedWork, r.capRate, r.offered/r.capRate),
			fmt.Sprintf("LoadShedder, fixed + queue: Limit %d (the workers), MaxQueue %d, MaxQueueWait %v. "+
				"Adaptive: LoadShedderOptions{Adaptive: true}, every default (no queue; it starts at MinLimit 2 to measure "+
				"the no-load latency, then from 20). Shed requests get 503 and Retry-After: 1 or 2 at once.",
				r.workers, r.workers, 2*shedWork),
			"Goodput: 200s answered to a caller still waiting, per second, while the load runs.",
		},
		header: []string{"clients", "server", "server hits", "amplification", "shed", "wasted",
			"goodput/s (of capacity)", "success", "p50", "p99", "limit"},
	}
	s.notes = append(s.notes, cfg.scaleNote()...)
	if len(r.rows) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("Each row: %s sent by the clients.", plural(r.rows[0].sum.requests, "request")))
	}
	byClient := map[string][]line{}
	var clients []string
	for _, row := range r.rows {
		s.rows = append(s.rows, []string{
			row.policy.name, row.server, fmt.Sprint(row.attempts),
			fmt.Sprintf("%.2f×", row.amplification), fmt.Sprint(row.shed), fmt.Sprint(row.wasted),
			fmt.Sprintf("%.0f (%.0f%%)", row.goodput, 100*row.goodput/r.capRate), pct(row.sum.success),
			ms(row.sum.p50), ms(row.sum.p99), row.limit,
		})
		name := row.policy.name
		if _, ok := byClient[name]; !ok {
			clients = append(clients, name)
		}
		byClient[name] = append(byClient[name], line{name: row.server, ys: row.useful100})
	}
	s.policies = shedPolicies()
	// One chart per client policy, its lines the servers: four lines near
	// capacity in one chart could not be told apart.
	per100 := bucketWidth.Seconds()
	for _, name := range clients {
		s.charts = append(s.charts, chart{
			file: "shed-" + slug(name) + ".svg",
			svg: lineChart{
				title:  "Load shedding, clients with " + name + ": useful answers per 100ms",
				xLabel: "time (s)", yLabel: "useful answers (count) per 100ms",
				dx:     per100,
				lines:  byClient[name],
				bands:  []band{{from: 0, to: r.duration.Seconds(), label: "offered load"}},
				hlines: []hline{{y: r.capRate * per100, label: "capacity"}},
			}.svg(),
		})
	}
	return s
}
