package retryhttp_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hedged path once drifted from the retry loop (issue 12): it guessed
// idempotency by the default method list whatever the policy's, and gave no
// lost-connection refund. These tests pin both.

// Regression: a CustomizedShouldRetryFn's IdempotentMethods did not decide
// which requests were hedged: a DELETE that the policy does not guess
// idempotent (and would never retry after a timeout) was sent twice at
// once, and a POST it does guess idempotent was not hedged. The rules are
// given with WithCustomizedShouldRetryFn, for the transport or in SetOptions; a
// CustomizedShouldRetryFn passed as a function is any function to the
// transport, and the default list applies.
func TestHedgeFollowsPolicyIdempotentMethods(t *testing.T) {
	onlyGETOpts := retryhttp.CustomizedShouldRetryFnOptions{IdempotentMethods: []string{http.MethodGet}}
	onlyGET := retryhttp.WithCustomizedShouldRetryFn(onlyGETOpts)
	withPOST := retryhttp.WithCustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		IdempotentMethods: []string{http.MethodGet, http.MethodPost},
		RetryIf:           func(retryhttp.Attempt) bool { return false },
	})
	var asked atomic.Int32 // calls of a caller's own policy
	own := func(a retryhttp.Attempt) bool {
		asked.Add(1)
		return retryhttp.DefaultShouldRetryFn(a)
	}
	tests := []struct {
		name      string
		method    string
		opt       retryhttp.Option
		perReq    *retryhttp.CustomizedShouldRetryFnOptions // SetOptions(WithCustomizedShouldRetryFn)
		wantHits  int
		wantAsked int32
	}{
		{name: "DELETE, policy without it: not hedged", method: http.MethodDelete, opt: onlyGET, wantHits: 1},
		{name: "DELETE, per-request policy without it: not hedged", method: http.MethodDelete, perReq: &onlyGETOpts, wantHits: 1},
		{name: "POST, policy with it: hedged", method: http.MethodPost, opt: withPOST, wantHits: 2},
		{name: "GET, policy with it: hedged", method: http.MethodGet, opt: onlyGET, wantHits: 2},
		{name: "DELETE, policy passed as a function: default list, hedged", method: http.MethodDelete,
			opt: retryhttp.WithShouldRetryFn(retryhttp.CustomizedShouldRetryFn(onlyGETOpts)), wantHits: 2},
		// A caller's own function is only asked about attempts made, and
		// the default list applies.
		{name: "DELETE, own policy: default list, hedged", method: http.MethodDelete, opt: retryhttp.WithShouldRetryFn(own), wantHits: 2, wantAsked: 1},
		{name: "POST, own policy: default list, not hedged", method: http.MethodPost, opt: retryhttp.WithShouldRetryFn(own), wantHits: 1, wantAsked: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked.Store(0)
			hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 && hs.hold(n, r, notHedged) {
					return
				}
				fmt.Fprintf(w, "attempt %d", n)
			})
			opts := []retryhttp.Option{retryhttp.WithHedging(10*time.Millisecond, 1), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true})}
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			c, _ := newHedgeClient(t, opts...)
			req, err := http.NewRequest(tt.method, hs.URL, nil)
			require.NoError(t, err)
			if tt.perReq != nil {
				req = req.WithContext(retryhttp.SetOptions(req.Context(), retryhttp.WithCustomizedShouldRetryFn(*tt.perReq)))
			}

			res, err := c.Do(req)
			require.NoError(t, err)

			assert.Equal(t, fmt.Sprintf("attempt %d", tt.wantHits), testkit.ReadAll(t, res))
			assert.EqualValues(t, tt.wantHits, hs.hits.Load())
			assert.Equal(t, tt.wantAsked, asked.Load(), "calls of the caller's policy: one per outcome judged")
		})
	}
}

// Regression: a hedged request's retry after a lost connection spent a
// token of the budget for good, where the retry loop's is given back when
// the retry succeeds (budget.go settle): a healthy server that closes
// keep-alive connections drained the budget of hedged requests only.
func TestHedgeLostConnectionRetryRefunded(t *testing.T) {
	srv := testkit.NewRawServer(t, func(n int64) testkit.Reply {
		if n == 1 {
			return testkit.ReplyReset
		}
		return testkit.ReplyWith(http.StatusOK, []byte("ok"))
	})
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, Ratio: 0.001, NoParking: true})
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr := testkit.NewTransport(t, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(budget),
		retryhttp.WithHedging(time.Hour, 1))
	req, err := http.NewRequest(http.MethodGet, srv.URL(), nil)
	require.NoError(t, err)

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))

	assert.EqualValues(t, 2, srv.Requests.Load(), "the reset, then the retry")
	assert.InDelta(t, 2, budgetTokens(budget, srv.URL()), 1e-9, "the retry's token given back")
}
