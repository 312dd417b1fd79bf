package retryhttp_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTransportPerCallSharesConnections pins the pattern of a Transport made
// per call, common in real code: 50 calls, each through a new
// &http.Client{Transport: retryhttp.New()}, to a loopback server. Made
// without WithTransport, the Transports share the process's pooled base
// transport, so the server sees a handful of connections rather than one per
// call (50 when each Transport had a pool of its own), and
// CloseIdleConnections on any of them leaves none open.
func TestTransportPerCallSharesConnections(t *testing.T) {
	const calls = 50
	var opened, closed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	call := func() (string, error) {
		client := &http.Client{Transport: retryhttp.New(), Timeout: 10 * time.Second}
		res, err := client.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	for range calls {
		body, err := call()
		require.NoError(t, err)
		require.Equal(t, "ok", body)
	}
	// Sequential calls reuse one connection; a call may now and then start
	// before the previous connection is back in the pool and dial another.
	assert.LessOrEqual(t, opened.Load(), int64(5), "connections for %d per-call Transports", calls)
	assert.Positive(t, opened.Load())

	retryhttp.New().CloseIdleConnections()
	assert.Eventually(t, func() bool { return closed.Load() == opened.Load() }, 5*time.Second, 10*time.Millisecond,
		"every connection closed after CloseIdleConnections")
}

// TestDefaultBaseTransportIsTheSharedOne: the exported accessor returns the
// very transport that Transports without WithTransport send through, with
// go-cleanhttp's settings (a pool of idle connections per host, unlike
// http.DefaultTransport's 2).
func TestDefaultBaseTransportIsTheSharedOne(t *testing.T) {
	base := retryhttp.DefaultBaseTransport()
	assert.Same(t, retryhttp.BaseTransport(retryhttp.New()), base)
	assert.Same(t, base, retryhttp.DefaultBaseTransport())
	ht, ok := base.(*http.Transport)
	require.True(t, ok, "%T", base)
	assert.Greater(t, ht.MaxIdleConnsPerHost, http.DefaultMaxIdleConnsPerHost)
	assert.NotSame(t, http.DefaultTransport, base)
}
