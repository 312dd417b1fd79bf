package retryhttp_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
)

// TestAmplificationDeadBackend measures the table of docs/storms.md: server
// hits per logical request on a backend that answers every request with
// 503, with 50 concurrent clients each sending 100 GETs. (With the budget
// off, the ratio does not depend on the number of requests: 20 each are
// enough, and spare the race detector 16,000 requests.)
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
		want      float64
	}{
		{name: "no retries (WithMaxRetries(0))", opts: []retryhttp.Option{retryhttp.WithMaxRetries(0)}, want: 1},
		{
			name: "retryhttp defaults, a Transport per client",
			want: float64(requests+clients*retryhttp.DefaultRetryBudgetCapacity) / requests,
		},
		{
			name: "retryhttp defaults, one Transport shared by the clients", shared: true,
			want: float64(requests+retryhttp.DefaultRetryBudgetCapacity) / requests,
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
			srv := deadServer(t)
			shared := newClient(t, tt.opts...)
			var wg sync.WaitGroup
			for range clients {
				c := shared
				if !tt.shared {
					c = newClient(t, tt.opts...)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						assert.Equal(t, http.StatusServiceUnavailable, get(t, c, srv.URL))
					}
				}()
			}
			wg.Wait()

			got := float64(srv.attempts.Load()) / float64(clients*n)
			t.Logf("| %s | %.3f× |", tt.name, got)
			assert.InDelta(t, tt.want, got, 1e-9)
		})
	}
}
