package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp/inbound"
)

// Chain scenario.
const (
	hops          = 5 // servers S1 … S5; S5 is the tail
	chainCallers  = 4 // concurrent callers at the head of the chain
	flakyShare    = 0.05
	chainWaits    = 0.1              // waits are scaled by this, besides the timescale
	chainDeadline = 30 * time.Second // of a caller's request, not scaled
)

// chainTail is how S5 behaves.
type chainTail struct {
	name string
	fail func(rng *rand.Rand) bool
}

var chainTails = []chainTail{
	{"dead", func(*rand.Rand) bool { return true }},
	{"flaky 5%", func(rng *rand.Rand) bool { return rng.Float64() < flakyShare }},
}

// chainPolicies are the rows of the chain scenario, run against each tail.
func chainPolicies() []policy {
	return []policy{naivePolicy(), defaultsPolicy(), crossHopPolicy()}
}

// crossHopPolicy is the "defaults + cross-hop signal" row: the default
// transport at every hop, and every hop's handler wrapped in
// inbound.Pushback, so that a hop whose retries gave up tells the hops
// above it not to retry (Retry-Pushback: no-retry, which proxy passes up
// with the other response headers).
func crossHopPolicy() policy {
	p := defaultsPolicy()
	p.name = "defaults + cross-hop signal"
	p.about = "retryhttp.New() at every hop, and every hop's handler wrapped in inbound.Pushback"
	p.pushback = true
	return p
}

// chainRow is the result of one policy against one tail.
type chainRow struct {
	policy   policy
	tail     string
	sum      summary
	hits     [hops]int64 // requests received by S1 … S5
	requests int
}

// perRequest returns the requests S5 received per client request.
func (r chainRow) perRequest() float64 { return float64(r.hits[hops-1]) / float64(max(r.requests, 1)) }

// chainResult is the chain scenario's outcome.
type chainResult struct {
	rows []chainRow
}

// chainRequests returns the number of requests each caller sends to a tail:
// few to a dead one, where the naive policy costs 363 HTTP requests each.
func chainRequests(cfg config, tail string) int {
	if tail == "dead" {
		return max(1, cfg.clients/(5*chainCallers))
	}
	return max(1, cfg.clients/chainCallers)
}

// runChain sends GETs through client → S1 → … → S5, where every client
// (the callers' and each of S1 … S4's outbound one) follows the policy under
// test. A hop answers with the status it got from the next one, and its
// headers, or 502 on an error.
func runChain(ctx context.Context, cfg config) (chainResult, error) {
	var r chainResult
	for _, tail := range chainTails {
		for _, p := range chainPolicies() {
			row, err := chainRun(ctx, cfg, p, tail)
			if err != nil {
				return r, err
			}
			r.rows = append(r.rows, row)
		}
	}
	return r, nil
}

// chainRun runs one policy against one tail, on a fresh chain.
func chainRun(ctx context.Context, cfg config, p policy, tail chainTail) (chainRow, error) {
	waitScale := chainWaits * cfg.timescale
	start := time.Now()
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(cfg.seed, 0xc4a1))
	servers := make([]*server, hops)
	defer func() {
		for _, s := range servers {
			if s != nil {
				s.close()
			}
		}
	}()
	h := handlerFunc(func(w http.ResponseWriter, _ *http.Request) int {
		mu.Lock()
		fail := tail.fail(rng)
		mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return http.StatusServiceUnavailable
		}
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	})
	for i := hops - 1; i >= 0; i-- {
		if i < hops-1 {
			base := newBase()
			defer base.CloseIdleConnections()
			h = proxy(&http.Client{Transport: p.transport(base, waitScale)}, servers[i+1].URL)
			if p.pushback {
				h = withPushback(h)
			}
		}
		s, err := startServer(h, start, time.Hour, 1)
		if err != nil {
			return chainRow{}, err
		}
		servers[i] = s
	}

	base := newBase()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: p.transport(base, waitScale), Timeout: chainDeadline}
	n := chainRequests(cfg, tail.name)
	outcomes := make([]outcome, chainCallers*n)
	var wg sync.WaitGroup
	for c := range chainCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range n {
				t0 := time.Now()
				err := get(ctx, client, servers[0].URL)
				outcomes[c*n+k] = outcome{latency: time.Since(t0), ok: err == nil}
			}
		}()
	}
	wg.Wait()
	// Wall-clock latencies, not model times: chainSection says why.
	row := chainRow{policy: p, tail: tail.name, sum: summarize(outcomes), requests: len(outcomes)}
	for i, s := range servers {
		row.hits[i] = s.requests.Load()
	}
	return row, nil
}

// proxy is the handler of a hop: it sends a GET to next through c and
// answers with what it got (status, headers and body), or 502 on an error.
func proxy(c *http.Client, next string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) int {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return http.StatusInternalServerError
		}
		res, err := c.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return http.StatusBadGateway
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
		return res.StatusCode
	}
}

// withPushback wraps a hop's handler in inbound.Pushback.
func withPushback(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) int {
		var status int
		inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			status = h(w, r)
		})).ServeHTTP(w, r)
		return status
	}
}

// chainSection turns the result into the report's section.
func chainSection(r chainResult, cfg config) section {
	s := section{
		id:    "chain",
		title: "Five-hop chain: client → S1 → S2 → S3 → S4 → S5, S5 failing",
		notes: []string{
			fmt.Sprintf("%d callers send GETs one after the other (%d each to the dead tail, %d each to the flaky one); "+
				"the callers and S1 … S4 each have one client following the policy.",
				chainCallers, chainRequests(cfg, "dead"), chainRequests(cfg, "flaky 5%")),
			"A hop answers with the status and headers it got, or 502 on an error. Naive: 3 tries per hop, so 3^5 = 243 requests at S5 per request when S5 is dead.",
			fmt.Sprintf("Waits are scaled ×%g (retryhttp's 250ms base becomes %v) so that the run takes seconds: it changes latencies, not which retries are sent.",
				chainWaits, time.Duration(float64(250*time.Millisecond)*chainWaits)),
		},
		header: []string{"policy", "S5", "requests", "S1 … S5 hits", "S5 hits per request", "success", "p50", "p99"},
	}
	s.notes = append(s.notes, cfg.scaleNote()...)
	if cfg.timescale != 1 {
		s.notes = append(s.notes, "Here p50 and p99 are wall-clock times, not model times: the waits of the retry budget "+
			"(a parked retry waits up to 2s) are retryhttp's own, not scaled, so dividing by the timescale would inflate them.")
	}
	var bars []bar
	for _, row := range r.rows {
		s.rows = append(s.rows, []string{
			row.policy.name, row.tail, fmt.Sprint(row.requests),
			fmt.Sprintf("%d %d %d %d %d", row.hits[0], row.hits[1], row.hits[2], row.hits[3], row.hits[4]),
			fmt.Sprintf("%.2f×", row.perRequest()), pct(row.sum.success), ms(row.sum.p50), ms(row.sum.p99),
		})
		bars = append(bars, bar{label: row.policy.name + ", S5 " + row.tail, value: row.perRequest(), policy: row.policy.name})
	}
	s.policies = append(s.policies, chainPolicies()...)
	s.charts = []chart{{
		file: "chain.svg",
		svg:  barChart{title: "Five-hop chain: requests at S5 per client request (log scale)", xLabel: "requests at S5 per client request", bars: bars}.svg(),
	}}
	return s
}
