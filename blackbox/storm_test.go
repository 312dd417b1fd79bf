package blackbox

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
)

// TestAmplificationDeadBackend measures the table of docs/storms-lab.md: server
// hits per logical request on a backend that answers every request with
// 503, with 50 concurrent clients each sending 100 GETs. (Without a budget,
// or without retries, the ratio does not depend on the number of requests:
// 20 each are enough, and spare the race detector 12,000 requests.)
// Transports made per client without WithRetryBudget share the process's
// default budget; the test gives them one budget of their own, shared, to
// stand for it. With parking on, a budget's parked retries add at most
// their probes (testkit.MaxProbes) to its ten retries; they wait out
// their bounds (MaxWait) on a clock that jumps to the end of every wait
// (retryhttp.NewAutoFakeTime, as onFakeTime), shared by the budget and the
// Transports that use it, in microseconds instead of seconds. A retry that
// saw a token, and whose delay ends after its host has been seen failing,
// parks instead of taking it: a few of the ten may go unspent (5,008 to
// 5,014 hits, probes included, in 200 runs of either row).
func TestAmplificationDeadBackend(t *testing.T) {
	const (
		clients   = 50
		perClient = 100
		requests  = clients * perClient
	)
	tests := []struct {
		name      string
		shared    bool // one Transport for all the clients, else one each
		perClient int  // requests per client, if not perClient
		opts      []retryhttp.Option
		fakeTime  bool // one budget with the defaults for all the clients' Transports, on one fake clock with them
		want      float64
		probes    int // at most this many more hits than want
		unspent   int // at most this many fewer hits than want

		ownNoParking bool // each Transport gets a budget of its own, parking off
	}{
		{name: "no retries (WithMaxRetries(0))", perClient: 20, opts: []retryhttp.Option{retryhttp.WithMaxRetries(0)}, want: 1},
		{
			name: "retryhttp defaults, a Transport per client", fakeTime: true,
			want: float64(requests+retryhttp.DefaultRetryBudgetCapacity) / requests, probes: testkit.MaxProbes,
			unspent: retryhttp.DefaultRetryBudgetCapacity / 2,
		},
		{
			name: "retryhttp defaults, one Transport shared by the clients", shared: true, fakeTime: true,
			want: float64(requests+retryhttp.DefaultRetryBudgetCapacity) / requests, probes: testkit.MaxProbes,
			unspent: retryhttp.DefaultRetryBudgetCapacity / 2,
		},
		{
			name: "parking off, a budget per Transport (per client)", ownNoParking: true,
			want: float64(requests+clients*retryhttp.DefaultRetryBudgetCapacity) / requests,
		},
		{
			name: "retryhttp, budget off (WithRetryBudget(nil))", perClient: 20,
			opts: []retryhttp.Option{retryhttp.WithRetryBudget(nil)}, want: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := perClient
			if tt.perClient != 0 {
				n = tt.perClient
			}
			opts := tt.opts
			if tt.fakeTime {
				c := retryhttptest.NewClock(time.Now())
				opts = []retryhttp.Option{
					retryhttp.WithClock(c),
					retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Clock: c})),
				}
			}
			srv := testkit.DeadServer(t)
			shared := testkit.NewClient(t, opts...)
			var wg sync.WaitGroup
			for range clients {
				c := shared
				switch {
				case tt.ownNoParking:
					c = testkit.NewClient(t, testkit.NoParking(retryhttp.RetryBudgetOptions{}))
				case !tt.shared:
					c = testkit.NewClient(t, opts...)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						assert.Equal(t, http.StatusServiceUnavailable, testkit.Get(t, c, srv.URL))
					}
				}()
			}
			wg.Wait()

			got := float64(srv.Attempts.Load()) / float64(clients*n)
			t.Logf("| %s | %.3f× | %d hits", tt.name, got, srv.Attempts.Load())
			assert.GreaterOrEqual(t, got, tt.want-float64(tt.unspent)/float64(clients*n)-1e-9)
			assert.LessOrEqual(t, got, tt.want+float64(tt.probes)/float64(clients*n)+1e-9)
		})
	}
}
