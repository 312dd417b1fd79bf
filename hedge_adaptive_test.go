package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/destinations"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
)

const (
	tailFast = 2 * time.Millisecond  // the usual latency of tailServer
	tailSlow = 60 * time.Millisecond // its slow tail's
)

// tailServer answers GET /?id=N after tailFast, but the first request of
// every 20th id (5%) after tailSlow, or when the request is cancelled.
func tailServer(t *testing.T) *testkit.CountingServer {
	var mu sync.Mutex
	seen := map[string]bool{}
	return testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		n, _ := strconv.Atoi(id)
		d := tailFast
		if first && n%20 == 0 {
			d = tailSlow
		}
		select {
		case <-time.After(d):
			_, _ = w.Write([]byte("ok"))
		case <-r.Context().Done():
		}
	})
}

// hedgeCounter counts the hedges of each request, by the id in its URL.
type hedgeCounter struct {
	mu     sync.Mutex
	hedges map[string]int
}

func (c *hedgeCounter) option() retryhttp.Option {
	c.hedges = map[string]int{}
	return retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if d.Hedge {
			c.mu.Lock()
			c.hedges[d.Attempt.Req.URL.Query().Get("id")]++
			c.mu.Unlock()
		}
	}})
}

func (c *hedgeCounter) of(id int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hedges[strconv.Itoa(id)]
}

// getID sends GET /?id=id with ctx and returns how long it took.
func getID(ctx context.Context, t *testing.T, c *http.Client, url string, id int) (time.Duration, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/?id=%d", url, id), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		return time.Since(start), err
	}
	drainClose(t, res)
	return time.Since(start), nil
}

func drainClose(t *testing.T, res *http.Response) {
	t.Helper()
	buf := make([]byte, 64)
	for {
		if _, err := res.Body.Read(buf); err != nil {
			break
		}
	}
	if err := res.Body.Close(); err != nil {
		t.Fatal(err)
	}
}

// On a host with a 5% slow tail, adaptive hedging sends no hedge until the
// host's window holds enough first attempts, then hedges the slow ones:
// they end long before the tail's latency, for few extra requests. The
// first attempts are timed with a retry budget or without one.
func TestAdaptiveHedgingFollowsTheTail(t *testing.T) {
	for _, tt := range []struct {
		name   string
		budget *retryhttp.RetryBudget
	}{
		{"own budget", retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})},
		{"no budget", nil},
	} {
		t.Run(tt.name, func(t *testing.T) { followsTheTail(t, tt.budget) })
	}
}

func followsTheTail(t *testing.T, b *retryhttp.RetryBudget) {
	const (
		q        = 0.9
		cold     = 40 // tailMinSamples(0.9)
		requests = 300
	)
	srv := tailServer(t)
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(q, 1), hc.option(), retryhttp.WithRetryBudget(b))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	rescued, slow := 0, 0
	for id := range requests {
		took, err := getID(context.Background(), t, c, srv.URL, id)
		if err != nil {
			t.Fatalf("request %d: %v", id, err)
		}
		switch {
		case id < cold && hc.of(id) != 0:
			t.Fatalf("request %d, before the window holds %d first attempts: %d hedges, want none", id, cold, hc.of(id))
		case id >= 2*cold && id%20 == 0:
			slow++
			if took < tailSlow/2 && hc.of(id) == 1 {
				rescued++
			}
		}
	}
	if rescued < slow*8/10 {
		t.Errorf("%d of %d requests whose first attempt was slow ended by a hedge within %v, want 80%% at least", rescued, slow, tailSlow/2)
	}
	if extra := float64(srv.Attempts.Load())/requests - 1; extra > 0.15 {
		t.Errorf("the server received %.0f%% more requests than were sent, want 15%% at most", extra*100)
	}
}

// A request whose deadline leaves less than twice the host's hedge delay
// is not hedged: a hedge sent after that delay could not come back.
func TestAdaptiveHedgingNotWithinTheDeadline(t *testing.T) {
	srv := tailServer(t)
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.9, 1), hc.option(),
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for id := 1; id < 60; id++ { // no slow one: id 0 is the first slow one
		if id%20 == 0 {
			continue
		}
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
	}
	// The hedge delay is tailFast at least: a deadline of 1.5 tailFast
	// leaves less than twice that.
	ctx, cancel := context.WithTimeout(context.Background(), tailFast*3/2)
	defer cancel()
	if _, err := getID(ctx, t, c, srv.URL, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow request with a short deadline: %v, want context.DeadlineExceeded", err)
	}
	if n := hc.of(100); n != 0 {
		t.Errorf("slow request with a short deadline: %d hedges, want none", n)
	}
	// Without a deadline, the same kind of request is hedged.
	if _, err := getID(context.Background(), t, c, srv.URL, 120); err != nil {
		t.Fatal(err)
	}
	if n := hc.of(120); n != 1 {
		t.Errorf("slow request without a deadline: %d hedges, want 1", n)
	}
}

// Every hedge is charged to the retry budget: once a budget that never
// refills is spent, slow requests are no longer hedged.
func TestAdaptiveHedgingChargedToTheBudget(t *testing.T) {
	srv := tailServer(t)
	var hc hedgeCounter
	var hedges atomic.Int64
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Ratio: 0.001, Capacity: 2, NoParking: true})
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.9, 1), hc.option(), retryhttp.WithRetryBudget(budget))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for id := range 200 {
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
		hedges.Add(int64(hc.of(id)))
	}
	if n := hedges.Load(); n == 0 || n > 3 {
		t.Errorf("%d hedges with a budget of 2 tokens that barely refills, want 1 to 3", n)
	}
}

// A destination policy's hedging with a quantile follows that host's
// latency, as WithAdaptiveHedging does; the file form says the same.
func TestAdaptiveHedgingDestination(t *testing.T) {
	srv := tailServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := destinations.Parse([]byte(`{"destinations": [{"host": "` + host + `", "hedging": {"quantile": 0.9, "maxHedges": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Destinations[0].Hedging; h == nil || h.Quantile != 0.9 || h.MaxHedges != 1 || h.Delay != 0 {
		t.Fatalf("parsed hedging %+v, want quantile 0.9, maxHedges 1", h)
	}
	d, err := destinations.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithPolicyFunc(d.Policy), hc.option(),
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	hedged := 0
	for id := range 161 {
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
		if id >= 80 {
			hedged += hc.of(id)
		}
	}
	if hc.of(0) != 0 || hc.of(20) != 0 || hedged < 3 {
		t.Errorf("hedges: %d and %d before the window filled (want none), %d of the 5 slow ones after (want 3 at least)", hc.of(0), hc.of(20), hedged)
	}
}

// No hedge is sent with less than the hedge delay left before the deadline:
// of two hedges that a request hanging on every attempt would get, the
// second, due at twice the delay, is not sent when the deadline falls at 2.5
// times the delay.
func TestAdaptiveHedgingNoLateHedge(t *testing.T) {
	const usual = 10 * time.Millisecond
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		d := usual
		if r.URL.Query().Get("id") == "hang" {
			d = time.Hour
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
	})
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.9, 2), hc.option(), retryhttp.WithRetryBudget(nil))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for id := range 40 { // tailMinSamples(0.9)
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/?id=hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := retryhttp.AdaptiveHedgeDelay(tr, req, 0.9)
	if !ok || d < usual {
		t.Fatalf("hedge delay %v, %v: want %v at least", d, ok, usual)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d*5/2)
	defer cancel()
	res, err := c.Do(req.WithContext(ctx))
	if err == nil {
		drainClose(t, res)
		t.Fatal("a request whose attempts all hang succeeded")
	}
	hc.mu.Lock()
	n := hc.hedges["hang"]
	hc.mu.Unlock()
	if n > 1 {
		t.Errorf("%d hedges, want at most 1: the second was due with less than the delay (%v) left", n, d)
	}
}
