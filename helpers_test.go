package retryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/require"
)

// roundTripFunc is a fake base transport, for pure unit tests only.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// slowHandler is how long a slow attempt holds its answer unless cancelled:
// far longer than any test may take.
const slowHandler = 10 * time.Second

// hedgeServer numbers the attempts it receives (1 for the first to arrive),
// hands each to handle, and records which attempts saw their request
// cancelled.
type hedgeServer struct {
	*httptest.Server
	hits      atomic.Int32
	arrived   chan int // attempt numbers, as they arrive
	cancelled chan int // attempt numbers whose request context ended
}

func newHedgeServer(t *testing.T, handle func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request)) *hedgeServer {
	t.Helper()
	hs := &hedgeServer{arrived: make(chan int, 1024), cancelled: make(chan int, 1024)}
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(hs.hits.Add(1))
		hs.arrived <- n
		handle(hs, n, w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// hold blocks attempt n until its request is cancelled (recorded) or d
// passes, and reports whether it was cancelled.
func (hs *hedgeServer) hold(n int, r *http.Request, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.Context().Done():
		hs.cancelled <- n
		return true
	case <-timer.C:
		return false
	}
}

// waitCancelled waits until the server has seen the cancellation of exactly
// the attempts want.
func (hs *hedgeServer) waitCancelled(t *testing.T, want ...int) {
	t.Helper()
	var got []int
	timeout := time.After(2 * time.Second)
	for len(got) < len(want) {
		select {
		case n := <-hs.cancelled:
			got = append(got, n)
		case <-timeout:
			require.Failf(t, "cancellations not seen", "got %v, want %v (%d attempts arrived)", got, want, hs.hits.Load())
		}
	}
	slices.Sort(got)
	require.Equal(t, want, got)
}

// slowFirst holds the first attempt and answers the others with their number.
func slowFirst(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
	if n == 1 && hs.hold(n, r, slowHandler) {
		return
	}
	fmt.Fprintf(w, "attempt %d", n)
}

// alwaysSlow holds every attempt.
func alwaysSlow(hs *hedgeServer, n int, _ http.ResponseWriter, r *http.Request) {
	hs.hold(n, r, slowHandler)
}

// TestMain fails the run if any test leaves a goroutine behind
// (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }

// The budget of a host, through the seams WithdrawFor, DepositFor and
// HostOf (export_test.go), by URL.

func mustRequest(rawURL string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// budgetWithdraw takes a retry token for rawURL's host.
func budgetWithdraw(b *retryhttp.RetryBudget, rawURL string) bool {
	return retryhttp.WithdrawFor(b, mustRequest(rawURL))
}

// budgetDeposit credits rawURL's host as an attempt answered with status
// would.
func budgetDeposit(b *retryhttp.RetryBudget, rawURL string, status int) {
	retryhttp.DepositFor(b, mustRequest(rawURL), &http.Response{StatusCode: status, Header: http.Header{}})
}

// budgetOutage puts rawURL's host in an outage: its latest
// testkit.OutageStreak attempts failed, so retries without a token park
// there.
func budgetOutage(b *retryhttp.RetryBudget, rawURL string) {
	for range testkit.OutageStreak {
		retryhttp.DepositFor(b, mustRequest(rawURL), nil)
	}
}

// budgetTokens returns the tokens left for rawURL's host.
func budgetTokens(b *retryhttp.RetryBudget, rawURL string) float64 {
	return retryhttp.HostOf(b, mustRequest(rawURL)).Tokens
}

// budgetPacing returns the window of rawURL's host, its slots held and the
// retries parked on it.
func budgetPacing(b *retryhttp.RetryBudget, rawURL string) (window float64, inFlight, parked int) {
	h := retryhttp.HostOf(b, mustRequest(rawURL))
	return float64(h.Window), h.InFlight, h.Parked
}

// budgetHosts returns the number of hosts whose buckets b keeps.
func budgetHosts(b *retryhttp.RetryBudget) int {
	n := 0
	for range b.Hosts() {
		n++
	}
	return n
}

// settings resolves the settings of t for a request carrying ctx.
func settings(t *retryhttp.Transport, ctx context.Context) retryhttp.ResolvedSettings {
	return retryhttp.SettingsFor(t, (&http.Request{URL: &url.URL{}}).WithContext(ctx))
}
