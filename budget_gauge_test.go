package retryhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostsOf returns the state of b's hosts by destination.
func hostsOf(b *retryhttp.RetryBudget) map[string]retryhttp.HostBudget {
	m := map[string]retryhttp.HostBudget{}
	for h := range b.Hosts() {
		m[h.Destination] = h
	}
	return m
}

// TestBudgetHostsDeadHost: a dead host drains its bucket, a healthy one
// keeps it full, and Hosts shows both, read while requests run.
func TestBudgetHostsDeadHost(t *testing.T) {
	dead, ok := testkit.DeadServer(t), testkit.OKServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 5, NoParking: true})
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b))
	assert.Empty(t, hostsOf(b), "a fresh budget tracks no host")

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // reads race with the requests (go test -race)
		defer wg.Done()
		for range 100 {
			for h := range b.Hosts() {
				assert.LessOrEqual(t, h.Tokens, 5.0)
			}
		}
	}()
	getMany(t, c, dead.URL, 20, 4)
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, ok.URL))
	wg.Wait()

	hosts := hostsOf(b)
	d := hosts["http://"+dead.Listener.Addr().String()]
	assert.Equal(t, retryhttp.HostBudget{Destination: "http://" + dead.Listener.Addr().String(),
		Tokens: 0, Capacity: 5, Window: 20}, d, "the dead host's bucket is empty")
	assert.Equal(t, int64(20+5), dead.Attempts.Load(), "the first attempts and five retries")
	h := hosts["http://"+ok.Listener.Addr().String()]
	assert.InDelta(t, 5.0, h.Tokens, 1e-9, "the healthy host's bucket is full")
	assert.Len(t, hosts, 2)

	for range b.Hosts() {
		break // stopping early is allowed
	}
	var none *retryhttp.RetryBudget
	assert.Empty(t, hostsOf(none), "a nil budget has no hosts")
}

// TestBudgetHostsParked: a retry parked on a host shows in its Parked
// count until its caller gives up.
func TestBudgetHostsParked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: time.Minute})
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b))
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/ok"))
	budgetOutage(b, srv.URL) // a host that answered parks only in an outage

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/fail", nil)
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	dest := "http://" + srv.Listener.Addr().String()
	require.Eventually(t, func() bool { return hostsOf(b)[dest].Parked == 1 }, 10*time.Second, time.Millisecond,
		"a retry parks")
	assert.Equal(t, 1.0, hostsOf(b)[dest].Tokens, "in an outage a retry parks, token or not")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.Zero(t, hostsOf(b)[dest].Parked)
}

// TestBudgetHostsAllocatesOneStringPerHost: Hosts allocates the
// destination's string and nothing else, for a host on its scheme's
// default port (whose port Destination spells out) as for any other.
func TestBudgetHostsAllocatesOneStringPerHost(t *testing.T) {
	for _, url := range []string{"http://example.test/", "http://example.test:8080/", "https://example.test/"} {
		b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})
		budgetWithdraw(b, url) // a withdrawal makes the host's state
		n := 0
		allocs := testing.AllocsPerRun(100, func() {
			for range b.Hosts() {
				n++
			}
		})
		assert.Equal(t, 1.0, allocs, url)
		assert.Positive(t, n, url)
	}
}
