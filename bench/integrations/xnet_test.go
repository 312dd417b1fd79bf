package integrations

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// resetFirstServer is an h2c server that resets the stream of the first
// request it gets, after reading its body (RST_STREAM, INTERNAL_ERROR), and
// echoes the body of the others.
func resetFirstServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var attempts atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if attempts.Add(1) == 1 {
			panic(http.ErrAbortHandler) // the server resets the stream
		}
		_, _ = w.Write(body)
	})
	srv := httptest.NewUnstartedServer(h2c.NewHandler(h, &http2.Server{}))
	srv.Config.ErrorLog = nil
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &attempts
}

// xnetH2C is golang.org/x/net/http2's Transport over cleartext TCP.
func xnetH2C() *http2.Transport {
	return &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// stdH2C is net/http's Transport, with its bundled HTTP/2, over cleartext
// TCP.
func stdH2C() *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

func TestStreamResetRetriedOnEitherHTTP2Stack(t *testing.T) {
	tests := []struct {
		name string
		base func() http.RoundTripper
	}{
		{"golang.org/x/net/http2", func() http.RoundTripper { return xnetH2C() }},
		{"net/http", func() http.RoundTripper { return stdH2C() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, attempts := resetFirstServer(t)
			base := tt.base()
			t.Cleanup(base.(interface{ CloseIdleConnections() }).CloseIdleConnections)
			var causes []string
			tr := retryhttp.New(retryhttp.WithTransport(base), ownBudget(), noDelay,
				retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
					if d.Retry {
						causes = append(causes, d.Cause())
					}
				}}))
			// A PUT without GetBody: idempotent, so a reset stream is retried,
			// from the copy of its streamed body.
			req, err := http.NewRequest(http.MethodPut, srv.URL, struct{ io.Reader }{strings.NewReader("payload")})
			require.NoError(t, err)

			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			defer res.Body.Close()
			got, err := io.ReadAll(res.Body)
			require.NoError(t, err)

			assert.Equal(t, "HTTP/2.0", res.Proto)
			assert.Equal(t, "payload", string(got))
			assert.EqualValues(t, 2, attempts.Load(), "reset, then answered")
			assert.Equal(t, []string{"connection"}, causes, "the reset stream is a lost connection")
		})
	}
}
