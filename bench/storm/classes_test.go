package storm

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// TestStormClasses measures the classes of storm that the budget lost on
// storms drawn at random: a host failing half its requests at random, a
// host flapping 400ms up and 400ms down at 300 requests a second, an open
// loop through outages in spells, a closed loop (a worker pool) through
// outages in spells of a slow service, and a closed-loop batch against a
// limiter whose 429 states no pause. Side by side: the defaults, full
// jitter without a budget, no retries and go-retryablehttp's defaults
// (mimicked with retryhttp's options). It reports, it does not fail:
//
//	cd bench/storm && go test -run TestStormClasses -count=1 -v .
//	cd bench/storm && go test -run TestStormClasses/half -count=1 -v . -args -openloop.seeds 1,2,3
func TestStormClasses(t *testing.T) {
	seeds := parseSeeds(t)
	open := []olStorm{
		{name: "half", rate: 25, load: 10 * time.Second, deadline: 10 * time.Second, failShare: 0.5,
			faults: func(uint64, time.Duration) []olSpell { return nil }},
		{name: "flap300", rate: 300, load: 8 * time.Second, deadline: 5 * time.Second,
			faults: flapSpells(400*time.Millisecond, 400*time.Millisecond)},
		{name: "spells", rate: 259, load: 10 * time.Second, deadline: 5 * time.Second, reset: true,
			faults: randomSpells(5, 300*time.Millisecond)},
	}
	for _, st := range open {
		st.policies = classPolicies
		t.Run(st.name, func(t *testing.T) {
			t.Logf("%s: %s", st.name, st.doc())
			for _, seed := range seeds {
				for _, r := range runOpenLoop(st, seed) {
					t.Logf("seed %d %-14s %7.2f%% %6.3fx p50 %7s p99 %7s max %7s  %s", seed, r.policy, 100*r.success(), r.amplification(),
						ms(r.p50), ms(r.p99), ms(r.max), r.stops())
				}
			}
		})
	}
	t.Run("closedspells", func(t *testing.T) {
		for _, seed := range seeds {
			for _, p := range classPolicies() {
				r := runClosedSpells(seed, p)
				t.Logf("seed %d %-14s %s", seed, p.name, r)
			}
		}
	})
	t.Run("bare429", func(t *testing.T) {
		for _, seed := range seeds {
			for _, p := range classPolicies() {
				r := runBare429(p)
				t.Logf("seed %d %-14s %s", seed, p.name, r)
			}
		}
	})
}

func parseSeeds(t *testing.T) []uint64 {
	var seeds []uint64
	for _, s := range splitComma(*openLoopSeeds) {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("-openloop.seeds: %v", err)
		}
		seeds = append(seeds, n)
	}
	return seeds
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func flapSpells(up, down time.Duration) func(uint64, time.Duration) []olSpell {
	return func(seed uint64, load time.Duration) []olSpell {
		rng := rand.New(rand.NewPCG(seed, 0xf1a9))
		var spells []olSpell
		for from := time.Duration(rng.Int64N(int64(up + down))); from < load; from += up + down {
			spells = append(spells, olSpell{from, min(from+down, load)})
		}
		return spells
	}
}

// randomSpells returns n spells of the given length, one in each n-th of
// the load at a random time within it.
func randomSpells(n int, length time.Duration) func(uint64, time.Duration) []olSpell {
	return func(seed uint64, load time.Duration) []olSpell {
		rng := rand.New(rand.NewPCG(seed, 0x5be1))
		part := load / time.Duration(n)
		var spells []olSpell
		for i := range n {
			from := time.Duration(i)*part + time.Duration(rng.Int64N(int64(part-length)))
			spells = append(spells, olSpell{from, from + length})
		}
		return spells
	}
}

func classPolicies() []olPolicy {
	if os.Getenv("CLASSES_DEFAULTS_ONLY") != "" {
		return openLoopPolicies()[:1]
	}
	return append(openLoopPolicies(), olPolicy{"retryablehttp", func() ([]retryhttp.Option, *retryhttp.RetryBudget) {
		return []retryhttp.Option{retryhttp.WithRetryBudget(nil), retryhttp.WithMaxRetries(4),
			retryhttp.WithShouldRetryFn(rhShouldRetry), retryhttp.WithDelayFn(rhDelay)}, nil
	}})
}

// rhShouldRetry and rhDelay mimic go-retryablehttp v0.7.8's defaults
// (cmd/retrylab's retryablehttpPolicy has the why).
func rhShouldRetry(a retryhttp.Attempt) bool {
	switch {
	case a.Req != nil && a.Req.Context().Err() != nil:
		return false
	case a.Err != nil:
		return true
	case a.Res == nil:
		return false
	case a.Res.StatusCode == http.StatusTooManyRequests:
		return true
	}
	code := a.Res.StatusCode
	return code == 0 || code >= 500 && code != http.StatusNotImplemented
}

func rhDelay(a retryhttp.Attempt) time.Duration {
	if res := a.Res; res != nil && (res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable) {
		if v := res.Header.Values("Retry-After"); len(v) > 0 {
			if s, err := strconv.ParseInt(v[0], 10, 64); err == nil && s >= 0 {
				return time.Duration(min(s, 1<<30)) * time.Second
			}
		}
	}
	return min(time.Second<<min(max(a.Count-1, 0), 5), 30*time.Second)
}

type closedResult struct {
	requests, ok int
	attempts     int64
	took         time.Duration
	extra        string
}

func (r closedResult) String() string {
	return fmt.Sprintf("%7.2f%% (%d/%d) %6.3fx took %7s %s", 100*float64(r.ok)/float64(r.requests), r.ok, r.requests,
		float64(r.attempts)/float64(r.requests), ms(r.took), r.extra)
}

// runClosedSpells: 70 workers, each 40 GETs one after the other, of a
// service that answers in about 270ms, which resets connections in four
// spells of 750ms within the first 10s.
func runClosedSpells(seed uint64, p olPolicy) closedResult {
	st := olStorm{name: "closedspells", reset: true, work: 270 * time.Millisecond}
	spells := randomSpells(4, 750*time.Millisecond)(seed, 10*time.Second)
	srv := newOLServer(st, spells, seed)
	defer srv.Close()
	stops := newStopCount()
	opts, _ := p.opts()
	rt := retryhttp.New(append(opts, stops.option())...)
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt}
	const workers, each = 70, 40
	start := time.Now()
	srv.start.Store(start.UnixNano())
	ok := closedBatch(client, srv.URL, workers*each, workers)
	return closedResult{requests: workers * each, ok: ok, attempts: srv.attempts.Load(), took: time.Since(start), extra: stops.String()}
}

// runBare429: a batch of 200 GETs from 10 workers against a fixed window
// of 50 requests per 2s whose 429 carries no header the client reads.
func runBare429(p olPolicy) closedResult {
	var mu sync.Mutex
	var winStart time.Time
	var used int
	var attempts, throttled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		mu.Lock()
		now := time.Now()
		if winStart.IsZero() || now.Sub(winStart) >= 2*time.Second {
			winStart, used = now, 0
		}
		allow := used < 50
		if allow {
			used++
		}
		mu.Unlock()
		if !allow {
			throttled.Add(1)
			w.Header().Set("X-Quota-Hint", "later")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	stops := newStopCount()
	opts, _ := p.opts()
	rt := retryhttp.New(append(opts, stops.option())...)
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt}
	const n, workers = 200, 10
	start := time.Now()
	ok := closedBatch(client, srv.URL, n, workers)
	return closedResult{requests: n, ok: ok, attempts: attempts.Load(), took: time.Since(start),
		extra: fmt.Sprintf("429s %d (limit %s) %s", throttled.Load(), ms(time.Duration(n-50)*2*time.Second/50), stops)}
}

// stopCount counts the stop reasons of the requests that did not succeed.
type stopCount struct {
	mu sync.Mutex
	n  map[string]int
}

func newStopCount() *stopCount { return &stopCount{n: map[string]int{}} }

func (c *stopCount) option() retryhttp.Option {
	return retryhttp.WithHooks(retryhttp.Hooks{OnPark: func(e retryhttp.ParkEvent) {
		if e.Kind == retryhttp.ParkDropped {
			c.mu.Lock()
			c.n["parkdrop:"+e.Reason.String()]++
			c.mu.Unlock()
		}
	}, OnRetryDecision: func(d retryhttp.Decision) {
		if d.Retry || d.Reason == retryhttp.StopSuccess {
			return
		}
		c.mu.Lock()
		c.n[d.Reason.String()]++
		c.mu.Unlock()
	}})
}

func (c *stopCount) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

// closedBatch sends n GETs to url from workers that each wait for an
// answer before the next, each with a deadline of a minute, and returns
// how many were answered 200.
func closedBatch(client *http.Client, url string, n, workers int) int {
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if r, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, r.Body)
					_ = r.Body.Close()
					if r.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}
