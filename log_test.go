package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clientBase is a base transport that is itself an http.Client, so that its
// errors are net/http's *url.Error, whose text quotes the URL with the
// password masked as "***" and the query and fragment in full.
type clientBase struct{ c *http.Client }

func (b clientBase) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = ""
	return b.c.Do(r)
}

// TestLogsRedactErrorsOfNestedClients: the errors of nested clients, of
// redirects and of proxies quote URLs in forms of their own; none of their
// userinfo, query or fragment reaches a log record.
func TestLogsRedactErrorsOfNestedClients(t *testing.T) {
	redirects := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/next?token=r3d1r3ct#frag", http.StatusFound)
	})
	proxy, err := url.Parse("http://proxyuser:pr0xypass@" + strings.TrimPrefix(testkit.DeadURL(t), "http://") + "/?ptoken=pr0xy")
	require.NoError(t, err)
	tests := []struct {
		name string
		base http.RoundTripper
		url  string
	}{
		{"nested client, refused", clientBase{&http.Client{}}, strings.Replace(testkit.DeadURL(t), "http://", "http://alice:pa55w0rd@", 1) + "/p?token=s3cr3t#frag"},
		{"nested client, redirects", clientBase{&http.Client{}}, strings.Replace(redirects.URL, "http://", "http://alice:pa55w0rd@", 1) + "/p?token=s3cr3t#frag"},
		{"nested client through a proxy", clientBase{&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}},
			"http://alice:pa55w0rd@example.test/p?token=s3cr3t#frag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(1), retryhttp.WithTransport(tt.base),
				retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool { return a.Err != nil }),
				retryhttp.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, tt.url, nil)
			require.NoError(t, err)
			_, err = tr.RoundTrip(req)
			require.Error(t, err)
			var ue *url.Error
			require.True(t, errors.As(err, &ue), "the base's error is a *url.Error: %v", err)
			logged := out.String()
			require.Equal(t, 2, strings.Count(logged, "\n"), "a retry and the give-up:\n%s", logged)
			for _, secret := range []string{"alice", "pa55w0rd", "token", "s3cr3t", "r3d1r3ct", "frag", "***", "xxxxx", "proxyuser", "pr0xy"} {
				assert.NotContains(t, logged, secret)
			}
		})
	}
}

// logRecord is one record written through a recordingHandler, its
// attributes as strings.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// recordingHandler is an slog.Handler that keeps every record in memory.
type recordingHandler struct {
	mu      sync.Mutex
	records []logRecord
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, rec)
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

func (h *recordingHandler) all() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), h.records...)
}

// retryLog and giveUpLog are the records expected for a retry and for
// giving up after an attempt answered 503.
func retryLog(url string, attempt, maxAttempts int, delay string) logRecord {
	return logRecord{slog.LevelInfo, "retryhttp: retrying", map[string]string{
		"method": "GET", "url": url, "attempt": fmt.Sprint(attempt), "max_attempts": fmt.Sprint(maxAttempts),
		"delay": delay, "status": "503", "reason": "status",
	}}
}

func giveUpLog(url string, attempts, maxAttempts int, status, reason string) logRecord {
	attrs := map[string]string{
		"method": "GET", "url": url, "attempt": fmt.Sprint(attempts), "max_attempts": fmt.Sprint(maxAttempts),
		"reason": reason,
	}
	if status != "" {
		attrs["status"] = status
	}
	return logRecord{slog.LevelWarn, "retryhttp: giving up", attrs}
}

func TestLogsNeverCarrySecrets(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	dead := testkit.DeadURL(t)
	tests := []struct {
		name string
		give string
		want string
	}{
		{"status", strings.Replace(srv.URL, "http://", "http://user:pa55w0rd@", 1) + "/a/b?token=s3cr3t#frag", srv.URL + "/a/b"},
		{"error", strings.Replace(dead, "http://", "http://user:pa55w0rd@", 1) + "/a?token=s3cr3t", dead + "/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
			tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(1), retryhttp.WithLogger(logger))
			c := &http.Client{Transport: tr}

			res, err := c.Get(tt.give)
			if err == nil {
				res.Body.Close()
			}
			logged := out.String()
			assert.Equal(t, 2, strings.Count(logged, "\n"), "a retry and the give-up:\n%s", logged)
			assert.Equal(t, 2, strings.Count(logged, "url="+tt.want+" "), logged)
			for _, secret := range []string{"user", "pa55w0rd", "token", "s3cr3t", "frag"} {
				assert.NotContains(t, logged, secret)
			}
		})
	}
}

// leakyTransport fails every attempt with an error that quotes the request's
// URL in full, as a careless base transport might.
type leakyTransport struct{}

func (leakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("cannot reach %s (or %s)", req.URL, req.URL.Redacted())}
}

func TestLogsRedactURLsQuotedInErrors(t *testing.T) {
	var out strings.Builder
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(1), retryhttp.WithTransport(leakyTransport{}),
		retryhttp.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))

	_, err := tr.RoundTrip(newGet(t, context.Background(), "http://u:pa55w0rd@example.test/p?token=s3cr3t"))
	require.Error(t, err)
	logged := out.String()
	assert.Contains(t, logged, "cannot reach http://example.test/p (or http://example.test/p)")
	for _, secret := range []string{"pa55w0rd", "s3cr3t", "xxxxx"} {
		assert.NotContains(t, logged, secret)
	}
}

func TestLoggerSilentByDefaultAndBelowItsLevel(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.StatusThen(503, 1))
	var out strings.Builder
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithLogger(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	status, err := (&observed{tr: tr}).send(newGet(t, context.Background(), srv.URL))
	require.NoError(t, err)
	assert.Equal(t, 200, status)
	assert.Empty(t, out.String(), "a retry is logged at Info")

	tr = testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithLogger(nil), retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: nil}), retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: nil}))
	status, err = (&observed{tr: tr}).send(newGet(t, context.Background(), srv.URL))
	require.NoError(t, err)
	assert.Equal(t, 200, status)
}

func TestLogRoundsDelays(t *testing.T) {
	for _, tt := range []struct {
		delay time.Duration
		want  string
	}{
		{1234567 * time.Nanosecond, "delay=1.2ms"},
		{512345 * time.Nanosecond, "delay=512µs"},
		{0, "delay=0s"},
	} {
		srv := testkit.NewCountingServer(t, testkit.StatusThen(503, 1))
		var out strings.Builder
		tr := testkit.NewTransport(t,
			retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return tt.delay }),
			retryhttp.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
		status, err := (&observed{tr: tr}).send(newGet(t, context.Background(), srv.URL))
		require.NoError(t, err)
		assert.Equal(t, 200, status)
		assert.Contains(t, out.String(), " "+tt.want+" ", "delay %v", tt.delay)
	}
}
