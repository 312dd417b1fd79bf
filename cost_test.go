//go:build !race

// The race detector may change what allocates, so these counts are checked
// without it.

package retryhttp_test

import (
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocsOf is testing.AllocsPerRun of one request built by newReq and sent
// through rt, which must succeed.
func allocsOf(t *testing.T, rt http.RoundTripper, newReq func(string) (*http.Request, error)) float64 {
	t.Helper()
	const url = "http://example.test/"
	require.NoError(t, roundTripOnce(rt, url, newReq))
	return testing.AllocsPerRun(100, mustRoundTrip(rt, url, newReq))
}

// TestRetryAllocs checks what one retry (a 503, then a 200) allocates
// beyond the base transport's own second round trip: the attempt's request
// copy with its Retry-Attempt value, and its header map (two allocations),
// as github.com/justinrixx/retryhttp's 3.
func TestRetryAllocs(t *testing.T) {
	const url = "http://example.test/"
	bare := &flipTransport{}
	bareAllocs := testing.AllocsPerRun(100, func() { require.NoError(t, bareRetry(bare, url)) })
	reqAllocs := testing.AllocsPerRun(100, func() { _, _ = newGET(url) })
	ours := allocsOf(t, newRetrying(&flipTransport{}), newGET)
	// bare's work is two requests built and sent; ours builds one.
	assert.Equal(t, bareAllocs-reqAllocs+3, ours, "bare %v (a request: %v), retryhttp %v", bareAllocs, reqAllocs, ours)
}

// TestKeyInjectionAllocs checks what injecting an idempotency key costs a
// POST: the request copy with the key's value slice, the header map (two
// allocations) and the key.
func TestKeyInjectionAllocs(t *testing.T) {
	keyed := allocsOf(t, retryhttp.New(retryhttp.WithTransport(memTransport{})), newPOST)
	noKeys := allocsOf(t, retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithIdempotencyKeys(false)), newPOST)
	assert.Equal(t, noKeys+4, keyed, "keys off %v, keys on %v", noKeys, keyed)
}
