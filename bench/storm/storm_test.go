package storm

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
)

const (
	clients   = 50  // concurrent clients, each with a transport of its own
	perClient = 100 // requests per client
	wait      = time.Millisecond
)

// client is one of the 50 clients: an http.Client and how to release it.
type client struct {
	*http.Client
	close func()
}

// library makes a client with a library's defaults, waits shortened to
// about 1ms.
type library struct {
	name      string
	newClient func() client
	want      float64 // server hits per logical request
	slack     float64 // at most this much more
	pushback  bool    // chain: inbound.Pushback on every server
}

// probes bounds the retries a budget's parked retries send to a dead host
// as probes, per outage (docs/budget-algorithm.md: one per 250ms for 2s, and the
// first).
const probes = 9

func libraries() []library {
	oneMS := retryhttp.WithDelayFn(retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{Base: wait, Cap: wait}))
	ours := func(opts ...retryhttp.Option) func() client {
		return func() client {
			tr := retryhttp.New(append([]retryhttp.Option{oneMS}, opts...)...)
			return client{&http.Client{Transport: tr}, tr.CloseIdleConnections}
		}
	}
	return []library{
		{name: "no retries", newClient: ours(retryhttp.WithMaxRetries(0)), want: 1},
		{
			// Transports without WithRetryBudget share the process's
			// default budget: 10 retries for the 50 clients, and the
			// probes of the retries they park.
			name: "retryhttp defaults", newClient: ours(),
			want:  float64(clients*perClient+retryhttp.DefaultRetryBudgetCapacity) / (clients * perClient),
			slack: float64(probes) / (clients * perClient),
		},
		{name: "retryhttp, budget off", newClient: ours(retryhttp.WithRetryBudget(nil)), want: 4},
		{
			name: "hashicorp/go-retryablehttp v0.7.8 defaults",
			newClient: func() client {
				rc := retryablehttp.NewClient()
				rc.RetryWaitMin, rc.RetryWaitMax = wait, wait
				rc.Logger = nil
				base := rc.HTTPClient.Transport.(*http.Transport)
				return client{rc.StandardClient(), base.CloseIdleConnections}
			},
			want: 5,
		},
		{
			name: "failsafe-go v0.9.8 failsafehttp defaults",
			newClient: func() client {
				base := cleanhttp.DefaultPooledTransport()
				policy := failsafehttp.NewRetryPolicyBuilder().WithDelay(wait).Build()
				return client{&http.Client{Transport: failsafehttp.NewRoundTripper(base, policy)}, base.CloseIdleConnections}
			},
			want: 3,
		},
	}
}

// TestAmplificationDeadBackend prints the table of docs/storms-lab.md: 50
// concurrent clients, each with its own transport, send 100 GETs each to a
// loopback server that answers every request with 503. (retryhttp's
// Transports share the process's default budget, as they do without
// WithRetryBudget; its state of the server's host is fresh, since each
// server has a port of its own.)
func TestAmplificationDeadBackend(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "\nMeasured amplification on a dead backend, %d clients × %d GETs:\n\n", clients, perClient)
	fmt.Fprintf(&table, "| client | server hits per logical request |\n|---|---|\n")
	for _, lib := range libraries() {
		t.Run(lib.name, func(t *testing.T) {
			got := amplification(t, lib.newClient)
			fmt.Fprintf(&table, "| %s | %.3f× |\n", lib.name, got)
			assert.GreaterOrEqual(t, got, lib.want-1e-9)
			assert.LessOrEqual(t, got, lib.want+lib.slack+1e-9)
		})
	}
	t.Log(table.String())
}

// amplification returns the server hits per logical request.
func amplification(t testing.TB, newClient func() client) float64 {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	var wg sync.WaitGroup
	for range clients {
		c := newClient()
		defer c.close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perClient {
				res, err := c.Get(srv.URL)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	return float64(hits.Load()) / (clients * perClient)
}
