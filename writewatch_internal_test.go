package retryhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchWritesOncePerRequest checks the watch installed once per request
// (watchWrites): attempts made from the watched request report their writes
// to it, a reset forgets the previous attempt's, the caller's request is
// never modified, and the caller's own trace still runs.
func TestWatchWritesOncePerRequest(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, own := range []bool{false, true} {
		callerWrote := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteHeaders: func() { callerWrote = true }})
		caller, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://a.test/", nil)
		require.NoError(t, err)
		req := caller
		if own {
			s := defaultSettings()
			f := scanHeader(caller.Header)
			var idem idempotency
			req, idem, err = s.keyed(caller, &f)
			require.NoError(t, err)
			require.True(t, idem.injected)
		}
		watched, w := watchWrites(req)
		assert.Same(t, ctx, caller.Context(), "the caller's request keeps its context")
		assert.NotSame(t, caller, watched)

		// Attempt 1 (a copy, as replay makes for a retry) writes its headers.
		r := replay{req: watched}
		sent, err := r.request(2)
		require.NoError(t, err)
		trace := httptrace.ContextClientTrace(sent.Context())
		require.NotNil(t, trace)
		w.reset()
		trace.WroteHeaders()
		assert.True(t, callerWrote, "the caller's trace runs too")
		assert.True(t, writtenFirst(w.mark(dialErr)), "a dial error after a write is marked")

		// Attempt 2 writes nothing: its dial error proves it never left.
		w.reset()
		assert.Same(t, error(dialErr), w.mark(dialErr), "own %v", own)
		assert.NoError(t, w.mark(nil))
	}
	var none *writeWatch
	none.reset() // no watch: nothing to do
	assert.Equal(t, context.Canceled, none.mark(context.Canceled))
}

// TestScanHeaderCanonicalWinsInAnyOrder checks the one walk of a header
// map (scanHeader) whatever the order the map is walked in: a name under
// its canonical spelling wins over the same name otherwise spelled.
func TestScanHeaderCanonicalWinsInAnyOrder(t *testing.T) {
	for i := 0; i < 200; i++ { // map order is random: many walks
		f := scanHeader(http.Header{"Idempotency-Key": {""}, "idempotency-key": {"k"}, "IDEMPOTENCY-KEY": {"k"},
			"X-Idempotency-Key": {"k"}, "x-idempotency-key": {""}, "retry-attempt": {"2"}, "Content-Type": {"a"}})
		require.True(t, f.hasKey && f.hasXKey && f.attempt)
		require.False(t, f.key, "the canonical Idempotency-Key is empty")
		require.True(t, f.xKey, "the canonical X-Idempotency-Key is not")
	}
}
