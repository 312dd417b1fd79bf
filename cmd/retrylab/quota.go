package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Quota scenario: a server that advertises its quota on every response
// (docs/ratelimit.md, "Advertised quotas"), closed-loop batches, and an
// interactive caller beside them. It runs in real time: the fields state
// whole seconds.

// quotaChildArg, as the first argument of the retrylab binary, makes it run
// one client process of the quota scenario and nothing else: its quotaJob
// as JSON on its standard input, its quotaClientRun as JSON on its standard
// output. As childArg, it is not a flag of the usage: only the quota
// scenario starts it, so that each client has a process, and so a
// process-wide quota book, of its own.
const quotaChildArg = "-retrylab-quota-child"

// quotaSetup is what the quota scenario runs.
type quotaSetup struct {
	limit   int           // requests per window; a bucket's tokens
	window  time.Duration // whole seconds; a bucket refills limit tokens in a window
	n       int           // the batch's requests (a fleet's, in all)
	workers int           // the batch's workers (each fleet process's)
	every   time.Duration // the interactive caller's pace; 0: none
	fleet   int           // processes of the fleet rows; 0: no fleet rows
	cases   []quotaCase   // of the one-client rows
	// fleetAll gives every case fleet rows; else only the first has them.
	fleetAll bool
	// procs bounds the client processes that run at once (rows are
	// started, in order, while they fit); 0: no bound.
	procs int
}

// quotaCase is a server of the quota scenario: how it limits, how it
// states its quota, and whether its 429s carry Retry-After.
type quotaCase struct {
	dialect    string // one of quotaDialects
	bucket     bool   // a token bucket; else a fixed window
	retryAfter bool   // its 429s carry Retry-After
}

// quotaDialects are the dialects the advertising server speaks: the IETF
// fields of draft-11, draft-07 and the drafts up to -06, the vendor
// X-RateLimit-* fields (an epoch reset, as GitHub's), and the LLM APIs'
// x-ratelimit-*-requests (read for the scopes a caller names:
// quotaCase.scope).
var quotaDialects = []string{"draft-11", "draft-07", "ratelimit-06", "x-ratelimit", "llm"}

// server names the case's server for the report: "window" or "bucket",
// with ", Retry-After" if its 429s carry one.
func (c quotaCase) server() string {
	s := "window"
	if c.bucket {
		s = "bucket"
	}
	if c.retryAfter {
		s += ", Retry-After"
	}
	return s
}

// scope is the quota scope the clients of the case name
// (retryhttp.WithQuotaScope), as docs/ratelimit.md says to for the LLM
// APIs' fields, which are read only for a named scope; "" for the others.
func (c quotaCase) scope() string {
	if c.dialect == "llm" {
		return "model"
	}
	return ""
}

// defaultQuotaCases are the servers of the lab's default run: a fixed
// window in draft-11 and draft-07, a token bucket in draft-11, and a fixed
// window in draft-11 whose 429s carry Retry-After.
func defaultQuotaCases() []quotaCase {
	return []quotaCase{{dialect: "draft-11"}, {dialect: "draft-07"}, {dialect: "draft-11", bucket: true},
		{dialect: "draft-11", retryAfter: true}}
}

// allQuotaCases are every combination: fixed window and token bucket,
// without and with Retry-After, in every dialect (-quota-all).
func allQuotaCases() []quotaCase {
	var cs []quotaCase
	for _, bucket := range []bool{false, true} {
		for _, ra := range []bool{false, true} {
			for _, d := range quotaDialects {
				cs = append(cs, quotaCase{dialect: d, bucket: bucket, retryAfter: ra})
			}
		}
	}
	return cs
}

// quotaAllProcs bounds the client processes of -quota-all that run at
// once: on 2 cores, more would measure the machine, not the pacing.
const quotaAllProcs = 12

// defaultQuotaSetup is the quota scenario of the lab's default run: the
// issue's (issue 37) server and batch; with all, every combination of
// server (-quota-all), each with its fleet rows, quotaAllProcs client
// processes at a time.
func defaultQuotaSetup(all bool) quotaSetup {
	q := quotaSetup{limit: 50, window: 2 * time.Second, n: 200, workers: 10, every: 100 * time.Millisecond, fleet: 4,
		cases: defaultQuotaCases()}
	if all {
		q.cases, q.fleetAll, q.procs = allQuotaCases(), true, quotaAllProcs
	}
	return q
}

// rate is the quota's rate, per second.
func (q quotaSetup) rate() float64 { return float64(q.limit) / q.window.Seconds() }

// limitFor is the time the quota takes to allow served requests: the first
// window's quota at once, the rest at its rate.
func (q quotaSetup) limitFor(served int) time.Duration {
	return time.Duration(float64(max(served-q.limit, 0)) / q.rate() * float64(time.Second))
}

// quotaPolicies are the rows of the quota scenario: the defaults (which
// pace to the advertised quota), and full jitter and go-retryablehttp's
// policy with the pacing off, as those clients do not read the fields.
func quotaPolicies() []policy {
	unpaced := func(p policy) policy {
		transport := p.transport
		p.about += "; quota pacing off: WithQuotaPacing(false)"
		p.transport = func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return transport(base, scale, append([]retryhttp.Option{retryhttp.WithQuotaPacing(false)}, extra...)...)
		}
		return p
	}
	return []policy{defaultsPolicy(), unpaced(fullJitterPolicy()), unpaced(retryablehttpPolicy())}
}

// quotaJob is what a client process runs: a closed-loop batch of N GETs of
// URL+"v1/batch" from Workers workers, and, if Every is positive, one GET
// of URL+"v1/interactive" every Every beside it, through the same client,
// with the policy named Policy, and WithQuotaScope naming Scope for every
// request if Scope is not empty. Cap bounds the process's run. (One first
// segment of the path for both: an X-RateLimit-* quota holds the route it
// was stated for.)
type quotaJob struct {
	URL     string        `json:"url"`
	Policy  string        `json:"policy"`
	Scope   string        `json:"scope,omitempty"`
	N       int           `json:"n"`
	Workers int           `json:"workers"`
	Every   time.Duration `json:"every"`
	Cap     time.Duration `json:"cap"`
}

// quotaClientRun is what a client process measured.
type quotaClientRun struct {
	OK          int           `json:"ok"`   // of the batch, answered 200
	Done        int64         `json:"done"` // when the batch's last request ended, Unix nanoseconds
	InterGets   int           `json:"inter_gets"`
	InterFailed int           `json:"inter_failed"`
	InterP99    time.Duration `json:"inter_p99"`
}

// quotaRow is one row: a server, a policy, and its client processes.
type quotaRow struct {
	quotaCase
	policy          policy
	clients         int
	n               int
	ok              int
	served, refused int64         // at the server: 200s and 429s
	took            time.Duration // from the server's first request to the last batch's end
	interGets       int
	interFailed     int
	interP99        time.Duration
}

// throttled is the share of the server's requests answered 429.
func (r quotaRow) throttled() float64 {
	return float64(r.refused) / float64(max(r.served+r.refused, 1))
}

// overLimit is the time taken over the quota's limit for what was served.
func (r quotaRow) overLimit(q quotaSetup) float64 {
	return r.took.Seconds() / max(q.limitFor(int(r.served)).Seconds(), 1e-9)
}

// quotaResult is the quota scenario's outcome.
type quotaResult struct {
	setup quotaSetup
	rows  []quotaRow
	took  time.Duration
}

// runQuota runs the quota scenario: the lab's default run, or with all
// every combination (-quota-all).
func runQuota(ctx context.Context, all bool) (quotaResult, error) {
	return quotaRun(ctx, defaultQuotaSetup(all))
}

// quotaSpec is a row to run: a server, a policy, its client processes.
type quotaSpec struct {
	c       quotaCase
	p       policy
	clients int
}

// quotaPhases are the rows of setup: first the one-client rows (every case
// and policy), then the fleet rows (every policy; of the first case, or of
// every case with fleetAll).
func quotaPhases(setup quotaSetup) [][]quotaSpec {
	var one []quotaSpec
	for _, c := range setup.cases {
		for _, p := range quotaPolicies() {
			one = append(one, quotaSpec{c, p, 1})
		}
	}
	phases := [][]quotaSpec{one}
	if setup.fleet > 1 && len(setup.cases) > 0 {
		cases := setup.cases[:1]
		if setup.fleetAll {
			cases = setup.cases
		}
		var fleet []quotaSpec
		for _, c := range cases {
			for _, p := range quotaPolicies() {
				fleet = append(fleet, quotaSpec{c, p, setup.fleet})
			}
		}
		phases = append(phases, fleet)
	}
	return phases
}

// quotaRun runs setup's phases (quotaPhases) one after the other, the rows
// of a phase at once, or, with procs, in groups of rows whose client
// processes fit in procs (a row larger than procs runs alone); each row
// with a server of its own in this process and its clients in child
// processes of this binary (selfExe).
func quotaRun(ctx context.Context, setup quotaSetup) (quotaResult, error) {
	r := quotaResult{setup: setup}
	exe, err := selfExe()
	if err != nil {
		return r, err
	}
	began := time.Now()
	for _, phase := range quotaPhases(setup) {
		for _, group := range quotaGroups(phase, setup.procs) {
			rows := make([]quotaRow, len(group))
			errs := make([]error, len(group))
			var wg sync.WaitGroup
			for i, s := range group {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rows[i], errs[i] = runQuotaRow(ctx, exe, setup, s.c, s.p, s.clients)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return r, err
			}
			r.rows = append(r.rows, rows...)
		}
	}
	r.took = time.Since(began)
	return r, nil
}

// quotaGroups splits a phase, in order, into groups whose client processes
// add up to at most procs (a row of more runs alone); procs 0: one group.
func quotaGroups(phase []quotaSpec, procs int) [][]quotaSpec {
	if procs <= 0 {
		return [][]quotaSpec{phase}
	}
	var groups [][]quotaSpec
	var cur []quotaSpec
	n := 0
	for _, s := range phase {
		if len(cur) > 0 && n+s.clients > procs {
			groups, cur, n = append(groups, cur), nil, 0
		}
		cur, n = append(cur, s), n+s.clients
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// runQuotaRow runs one row: an advertising server, and clients processes
// sharing its quota, n/clients requests each (the interactive caller
// beside the batch of a single client only).
func runQuotaRow(ctx context.Context, exe string, q quotaSetup, c quotaCase, p policy, clients int) (quotaRow, error) {
	adv := newAdvertiser(q, c, time.Now())
	srv, err := startServer(adv.serve, time.Now(), time.Second, 1)
	if err != nil {
		return quotaRow{}, err
	}
	defer srv.close()
	row := quotaRow{quotaCase: c, policy: p, clients: clients, n: q.n}
	runs := make([]quotaClientRun, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		job := quotaJob{URL: srv.URL, Policy: p.name, Scope: c.scope(), N: q.n / clients, Workers: q.workers,
			Cap: 2*q.limitFor(q.n) + 2*q.window + rowGrace}
		if i < q.n%clients {
			job.N++
		}
		if clients == 1 {
			job.Every = q.every
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = runQuotaChild(ctx, exe, job)
		}()
	}
	wg.Wait()
	srv.close() // before reading the counts: no handler runs after
	if err := errors.Join(errs...); err != nil {
		return row, err
	}
	var end int64
	for _, c := range runs {
		row.ok += c.OK
		end = max(end, c.Done)
		row.interGets += c.InterGets
		row.interFailed += c.InterFailed
		row.interP99 = max(row.interP99, c.InterP99)
	}
	first := adv.first()
	row.served, row.refused = adv.served.Load(), adv.refused.Load()
	if !first.IsZero() {
		row.took = time.Unix(0, end).Sub(first)
	}
	return row, nil
}

// runQuotaChild runs job in a child process of exe (quotaChildArg) and
// returns what it measured. The child is killed if it outlives its cap by
// a minute.
func runQuotaChild(ctx context.Context, exe string, job quotaJob) (quotaClientRun, error) {
	in, err := json.Marshal(job)
	if err != nil {
		return quotaClientRun{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, job.Cap+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, quotaChildArg)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &errb
	line := fmt.Sprintf("%s %s < job.json", exe, quotaChildArg)
	if err := cmd.Run(); err != nil {
		return quotaClientRun{}, fmt.Errorf("%w: %s: %v: %s", errChild, line, err, strings.TrimSpace(errb.String()))
	}
	var r quotaClientRun
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return quotaClientRun{}, fmt.Errorf("%w: %s: its output: %v", errChild, line, err)
	}
	return r, nil
}

// quotaChildMain is a quota client process's main: it runs the job read
// from stdin and writes what it measured to stdout. It returns the
// process's exit code.
func quotaChildMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var job quotaJob
	if len(args) != 0 {
		fmt.Fprintf(stderr, "retrylab %s: want no arguments, got %q\n", quotaChildArg, args)
		return 2
	}
	if err := json.NewDecoder(stdin).Decode(&job); err != nil {
		fmt.Fprintf(stderr, "retrylab %s: reading the job: %v\n", quotaChildArg, err)
		return 2
	}
	i := slices.IndexFunc(quotaPolicies(), func(p policy) bool { return p.name == job.Policy })
	if i < 0 || job.N < 1 || job.Workers < 1 || job.Cap <= 0 {
		fmt.Fprintf(stderr, "retrylab %s: bad job %+v\n", quotaChildArg, job)
		return 2
	}
	r := runQuotaClient(context.Background(), job, quotaPolicies()[i])
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		fmt.Fprintf(stderr, "retrylab %s: %v\n", quotaChildArg, err)
		return 1
	}
	return 0
}

// runQuotaClient runs job with policy p: one client for the batch and the
// interactive caller.
func runQuotaClient(ctx context.Context, job quotaJob, p policy) quotaClientRun {
	ctx, cancel := context.WithTimeout(ctx, job.Cap)
	defer cancel()
	base := newBase()
	defer base.CloseIdleConnections()
	var extra []retryhttp.Option
	if scope := job.Scope; scope != "" {
		extra = append(extra, retryhttp.WithQuotaScope(func(*http.Request) string { return scope }))
	}
	c := &http.Client{Transport: p.transport(base, 1, extra...), Timeout: job.Cap}
	url := strings.TrimSuffix(job.URL, "/")

	var inter *interactiveCaller
	if job.Every > 0 {
		inter = startInteractiveCaller(c, url+"/v1/interactive", job.Every)
	}
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for range job.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(job.N) && ctx.Err() == nil; i = next.Add(1) {
				if getAs(ctx, c, url+"/v1/batch", strconv.FormatInt(i, 10)) == nil {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r := quotaClientRun{OK: int(ok.Load()), Done: time.Now().UnixNano()}
	if inter != nil {
		r.InterGets, r.InterFailed, r.InterP99 = inter.finish()
	}
	return r
}

// interactiveCaller sends one GET every interval, each in a goroutine of its
// own (a user does not wait for the previous click's answer), until
// finished.
type interactiveCaller struct {
	stop, done chan struct{}
	mu         sync.Mutex
	lat        []time.Duration
	failed     int
}

func startInteractiveCaller(c *http.Client, url string, every time.Duration) *interactiveCaller {
	in := &interactiveCaller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(in.done)
		var calls sync.WaitGroup
		defer calls.Wait()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-in.stop:
				return
			case <-t.C:
			}
			calls.Add(1)
			go func() {
				defer calls.Done()
				t0 := time.Now()
				err := get(context.Background(), c, url)
				in.mu.Lock()
				defer in.mu.Unlock()
				in.lat = append(in.lat, time.Since(t0))
				if err != nil {
					in.failed++
				}
			}()
		}
	}()
	return in
}

// finish stops the caller, once its calls in flight have ended, and returns
// how many it sent, how many failed, and their p99 latency.
func (in *interactiveCaller) finish() (gets, failed int, p99 time.Duration) {
	close(in.stop)
	<-in.done
	slices.Sort(in.lat)
	return len(in.lat), in.failed, percentile(in.lat, 0.99)
}

// advertiser is a quota of limit requests that states itself on every
// response in one dialect: a fixed window of limit requests per window, or
// a token bucket of limit tokens refilling limit per window, whose stated
// reset is the time to a full bucket (as bench/storm's server states it).
// It answers the excess 429, without Retry-After (a pause only its fields
// state) unless the case asks for one: then the whole seconds until a
// request would be served, at least 1.
type advertiser struct {
	q     quotaSetup
	c     quotaCase
	start time.Time

	mu      sync.Mutex
	index   int64 // the current window's
	used    int
	tokens  float64   // the bucket's
	last    time.Time // of the bucket's latest refill
	firstAt time.Time
	served  atomic.Int64
	refused atomic.Int64
}

func newAdvertiser(q quotaSetup, c quotaCase, start time.Time) *advertiser {
	return &advertiser{q: q, c: c, start: start, tokens: float64(q.limit), last: start}
}

// first is when the first request arrived; zero if none did.
func (a *advertiser) first() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.firstAt
}

// quotaState is what the advertiser decided for one request.
type quotaState struct {
	ok        bool          // served
	remaining int           // the quota it leaves
	reset     time.Duration // until the window turns; a bucket's: until it is full
	next      time.Duration // until a request would be served: 0 if one would now
}

// admit decides a request arriving at now, and counts it.
func (a *advertiser) admit(now time.Time) quotaState {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstAt.IsZero() {
		a.firstAt = now
	}
	var st quotaState
	if a.c.bucket {
		rate := a.q.rate()
		if now.After(a.last) {
			a.tokens = min(float64(a.q.limit), a.tokens+now.Sub(a.last).Seconds()*rate)
			a.last = now
		}
		if a.tokens >= 1 {
			a.tokens--
			st.ok = true
		}
		st.remaining = int(a.tokens)
		st.reset = time.Duration((float64(a.q.limit) - a.tokens) / rate * float64(time.Second))
		if a.tokens < 1 {
			st.next = time.Duration((1 - a.tokens) / rate * float64(time.Second))
		}
	} else {
		if i := int64(now.Sub(a.start) / a.q.window); i != a.index {
			a.index, a.used = i, 0
		}
		if a.used < a.q.limit {
			a.used++
			st.ok = true
		}
		st.remaining = a.q.limit - a.used
		st.reset = a.start.Add(time.Duration(a.index+1) * a.q.window).Sub(now)
		if st.remaining == 0 {
			st.next = st.reset
		}
	}
	if st.ok {
		a.served.Add(1)
	} else {
		a.refused.Add(1)
	}
	return st
}

// header writes the quota st states to h in the case's dialect, for a
// response at now, and Retry-After on a 429 if the case has it.
func (a *advertiser) header(h http.Header, st quotaState, now time.Time) {
	limit, remaining := strconv.Itoa(a.q.limit), strconv.Itoa(st.remaining)
	secs := int(math.Ceil(st.reset.Seconds()))
	switch a.c.dialect {
	case "draft-11":
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, st.remaining, secs))
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, a.q.limit, int(a.q.window/time.Second)))
	case "draft-07":
		h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", a.q.limit, st.remaining, secs))
	case "ratelimit-06":
		h.Set("RateLimit-Limit", limit)
		h.Set("RateLimit-Remaining", remaining)
		h.Set("RateLimit-Reset", strconv.Itoa(secs))
	case "x-ratelimit":
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", remaining)
		h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(st.reset).Unix()+1, 10)) // an epoch, as GitHub's
	case "llm":
		h.Set("X-Ratelimit-Limit-Requests", limit)
		h.Set("X-Ratelimit-Remaining-Requests", remaining)
		h.Set("X-Ratelimit-Reset-Requests", st.reset.Round(time.Millisecond).String())
	}
	if !st.ok && a.c.retryAfter {
		h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(st.next.Seconds())))))
	}
}

func (a *advertiser) serve(w http.ResponseWriter, _ *http.Request) int {
	now := time.Now()
	st := a.admit(now)
	a.header(w.Header(), st, now)
	if !st.ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return http.StatusTooManyRequests
	}
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

// fleetCases says which servers have fleet rows, for the report.
func (q quotaSetup) fleetCases() string {
	switch {
	case len(q.cases) == 0 || q.fleet < 2:
		return "none"
	case q.fleetAll:
		return "every server"
	}
	return q.cases[0].dialect + " " + q.cases[0].server() + " only"
}

// procsNote says, for the report, how procs bounds the rows run at once.
func (q quotaSetup) procsNote() string {
	if q.procs <= 0 {
		return ""
	}
	return fmt.Sprintf(", in turns of at most %d client processes", q.procs)
}

// quotaSection turns the result into the report's section.
func quotaSection(r quotaResult) section {
	q := r.setup
	s := section{
		id:    "quota",
		title: "Advertised quota: closed-loop batches against a server that states its quota on every response",
		notes: []string{
			fmt.Sprintf("The server states its quota on every response (200 and 429), in one dialect per row. Window: a fixed window of %d "+
				"requests per %v, its reset T the whole seconds until the window turns. Bucket: a token bucket of %d tokens refilling %g per "+
				"second, its reset T the whole seconds until it is full. Dialects: "+
				`draft-11: RateLimit: "default";r=R;t=T and RateLimit-Policy: "default";q=%d;w=%d; draft-07: RateLimit: limit=%d, remaining=R, reset=T; `+
				"ratelimit-06: RateLimit-Limit, -Remaining, -Reset: T; x-ratelimit: X-RateLimit-Limit, -Remaining, -Reset: a Unix time; "+
				"llm: x-ratelimit-limit-requests, -remaining-requests, -reset-requests: a Go duration (6m0s), with WithQuotaScope naming the "+
				"scope, as docs/ratelimit.md says. Over the quota it answers 429 without Retry-After (the pause is only in the fields), or, "+
				"in the rows \"Retry-After\", with Retry-After: the whole seconds until it would serve a request, at least 1.",
				q.limit, q.window, q.limit, q.rate(), q.limit, int(q.window/time.Second), q.limit),
			fmt.Sprintf("1 client: a closed-loop batch of %d GETs from %d workers through one http.Client, and an interactive caller beside it "+
				"(one GET every %v through the same client, each in a goroutine of its own). %d clients (%s): %d processes of %d GETs from "+
				"%d workers each, sharing the quota, no interactive caller. Every client is a process of its own (this binary, run again): "+
				"the quota state of retryhttp is process-wide.", q.n, q.workers, q.every, q.fleet, q.fleetCases(), q.fleet,
				q.n/max(q.fleet, 1), q.workers),
			fmt.Sprintf("429s: the server's 429s over all the requests it answered. Time/limit: from the server's first request to the last "+
				"batch's end, over (served − %d) / %g per second, the time the quota takes to allow what it served (interactive calls included). "+
				"Interactive: the caller's p99 latency and its failures (the bars of issue 37: 429s at most 2%% for a client, 5%% for a fleet; "+
				"time/limit at most 1.15×, 1.25× for a fleet; interactive p99 within one window, no failure).", q.limit, q.rate()),
			fmt.Sprintf("Real time: the fields state whole seconds. The one-client rows run at once, each with its own server, then the fleet "+
				"rows at once%s. The scenario took %v.", q.procsNote(), r.took.Round(100*time.Millisecond)),
		},
		header: []string{"server", "dialect", "policy", "clients", "success", "429s", "time/limit", "interactive p99", "interactive failed"},
	}
	var throttled, finish []bar
	for _, row := range r.rows {
		p99, failed := "—", "—"
		if row.interGets > 0 {
			p99, failed = ms(row.interP99), fmt.Sprintf("%d of %d", row.interFailed, row.interGets)
		}
		s.rows = append(s.rows, []string{row.server(), row.dialect, row.policy.name, fmt.Sprint(row.clients),
			pct(float64(row.ok) / float64(max(row.n, 1))),
			fmt.Sprintf("%s (%d of %d)", pct(row.throttled()), row.refused, row.served+row.refused),
			fmt.Sprintf("%.2f×", row.overLimit(q)), p99, failed})
		label := fmt.Sprintf("%s %s, %s, %s", row.dialect, row.server(), plural(row.clients, "client"), row.policy.name)
		throttled = append(throttled, bar{label: label, value: 100 * row.throttled(), policy: row.policy.name})
		finish = append(finish, bar{label: label, value: row.overLimit(q), policy: row.policy.name})
	}
	s.policies = quotaPolicies()
	s.charts = []chart{
		{file: "quota.svg", svg: barChart{
			title: "Advertised quota: 429s at the server, % of its requests", xLabel: "429s, % of the requests the server answered",
			bars: throttled, linear: true,
		}.svg()},
		{file: "quota-finish.svg", svg: barChart{
			title:  "Advertised quota: time to finish the batch, over the time the quota allows",
			xLabel: "time / limit (1: as fast as the quota allows)", bars: finish, linear: true,
		}.svg()},
	}
	return s
}
