package retryhttp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// TestKeyedCopyHoldsWatch checks that a request copy with an injected key
// has room for the write watch only when its writes may be watched and its
// key does not make it guessed idempotent, and that the watch installed on
// it is that room, answering httptrace's lookup of the trace, with the
// caller's context values still reachable.
func TestKeyedCopyHoldsWatch(t *testing.T) {
	require.NotNil(t, clientTraceKey, "httptrace's key was found")
	type ctxKey struct{}
	for _, tc := range []struct {
		watchable, honored, room bool
	}{{true, false, true}, {false, false, false}, {true, true, false}} {
		ctx := context.WithValue(context.Background(), ctxKey{}, "v")
		caller, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://a.test/", nil)
		require.NoError(t, err)
		s := defaultSettings()
		s.idempotencyKeysHonored = tc.honored
		var f headerFacts
		req, idem, err := s.keyedFor(caller, &f, tc.watchable)
		require.NoError(t, err)
		require.True(t, idem.injected)
		room := keyedOf(req).watch
		assert.Equal(t, tc.room, room != nil, "%+v", tc)

		watched, w := watchWrites(req, true)
		assert.Same(t, req, watched, "the keyed copy carries the context itself")
		if tc.room {
			assert.Same(t, room, w, "the watch is the copy's room")
		}
		assert.Same(t, &w.trace, httptrace.ContextClientTrace(watched.Context()))
		assert.Equal(t, "v", watched.Context().Value(ctxKey{}))
		assert.Same(t, ctx, caller.Context())
		assert.Empty(t, caller.Header)
		assert.Equal(t, `context.Background.WithValue(retryhttp.ctxKey, v).WithValue(retryhttp write watch)`,
			watched.Context().(fmt.Stringer).String())
		assert.Nil(t, watched.Context().Value(nil))
		httptrace.ContextClientTrace(watched.Context()).WroteHeaders()
		assert.True(t, w.wrote.Load())
	}
}

// TestWroteClosureInWatch checks that the watch's callback is made inside
// the watch (watchfunc.go) with this compiler, and marks its own watch
// only.
func TestWroteClosureInWatch(t *testing.T) {
	require.NotZero(t, wroteCode, "closures are laid out as wroteClosure")
	var a, b writeWatch
	a.setWroteHeaders()
	b.setWroteHeaders()
	a.trace.WroteHeaders()
	assert.True(t, a.wrote.Load())
	assert.False(t, b.wrote.Load())
	b.trace.WroteHeaders()
	assert.True(t, b.wrote.Load())
}
