package retryhttp_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlineHeaders records the DeadlineHeader of every attempt ("-" when
// absent) and fails the first fails of them with 503.
type deadlineHeaders struct {
	mu   sync.Mutex
	seen []string
}

func (d *deadlineHeaders) handler(fails int64) testkit.HandlerFn {
	return func(n int64, w http.ResponseWriter, r *http.Request) {
		v, ok := r.Header[retryhttp.DeadlineHeader]
		d.mu.Lock()
		if ok {
			d.seen = append(d.seen, v[0])
		} else {
			d.seen = append(d.seen, "-")
		}
		d.mu.Unlock()
		if n <= fails {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
}

func (d *deadlineHeaders) millis(t *testing.T) []int {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var ms []int
	for _, v := range d.seen {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "attempt headers %q", d.seen)
		ms = append(ms, n)
	}
	return ms
}

// getWithin sends a GET through tr with a context of timeout (none if zero)
// and header values of the caller's own, if any.
func getWithin(t *testing.T, tr http.RoundTripper, url string, timeout time.Duration, own ...string) *http.Request {
	t.Helper()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for _, v := range own {
		req.Header.Add(retryhttp.DeadlineHeader, v)
	}
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)
	return req
}

// TestDeadlineHeaderPerAttempt: every attempt carries the time left,
// recomputed: each retry's is shorter than the one before by at least the
// wait between them.
func TestDeadlineHeaderPerAttempt(t *testing.T) {
	rec := &deadlineHeaders{}
	srv := testkit.NewCountingServer(t, rec.handler(2))
	wait := 30 * time.Millisecond
	tr := testkit.NewTransport(t, retryhttp.WithDeadlineHeader(true),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return wait }))
	req := getWithin(t, tr, srv.URL, 5*time.Second)
	ms := rec.millis(t)
	require.Len(t, ms, 3)
	assert.LessOrEqual(t, ms[0], 5000)
	assert.Greater(t, ms[0], 4000)
	for i := 1; i < len(ms); i++ {
		assert.LessOrEqual(t, ms[i], ms[i-1]-int(wait.Milliseconds()), "attempt %d", i+1)
	}
	assert.Empty(t, req.Header.Values(retryhttp.DeadlineHeader), "the caller's request is not modified")
}

func TestDeadlineHeader(t *testing.T) {
	tests := []struct {
		name    string
		options []retryhttp.Option
		timeout time.Duration
		own     []string
		check   func(t *testing.T, seen []string)
	}{
		{
			name: "off by default", timeout: time.Second,
			check: func(t *testing.T, seen []string) { assert.Equal(t, []string{"-"}, seen) },
		},
		{
			name: "no deadline, no header", options: []retryhttp.Option{retryhttp.WithDeadlineHeader(true)},
			check: func(t *testing.T, seen []string) { assert.Equal(t, []string{"-"}, seen) },
		},
		{
			name: "no deadline: the caller's own is sent as it is", options: []retryhttp.Option{retryhttp.WithDeadlineHeader(true)},
			own:   []string{"123"},
			check: func(t *testing.T, seen []string) { assert.Equal(t, []string{"123"}, seen) },
		},
		{
			name: "a deadline replaces the caller's own", options: []retryhttp.Option{retryhttp.WithDeadlineHeader(true)},
			timeout: time.Second, own: []string{"999999", "5"},
			check: func(t *testing.T, seen []string) {
				ms, err := strconv.Atoi(seen[0])
				require.NoError(t, err)
				assert.InDelta(t, 1000, ms, 500)
			},
		},
		{
			name: "bounded by the attempt timeout",
			options: []retryhttp.Option{retryhttp.WithDeadlineHeader(true),
				retryhttp.WithAttemptTimeout(200 * time.Millisecond)},
			timeout: time.Minute,
			check:   func(t *testing.T, seen []string) { assert.Equal(t, []string{"200"}, seen) },
		},
		{
			name: "at most 8 digits", options: []retryhttp.Option{retryhttp.WithDeadlineHeader(true)},
			timeout: 1000 * time.Hour,
			check:   func(t *testing.T, seen []string) { assert.Equal(t, []string{"99999999"}, seen) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &deadlineHeaders{}
			srv := testkit.NewCountingServer(t, rec.handler(0))
			getWithin(t, testkit.NewTransport(t, tt.options...), srv.URL, tt.timeout, tt.own...)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			tt.check(t, rec.seen)
		})
	}
}

// TestDeadlineHeaderAllocs bounds what the header costs an attempt with a
// deadline: a copy of the request and of its header map, the value (5
// allocations when measured; docs/deadlines.md), and nothing when off.
func TestDeadlineHeaderAllocs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	get := func(url string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	}
	const url = "http://example.test/"
	plain := testing.AllocsPerRun(100, mustRoundTrip(retryhttp.New(retryhttp.WithTransport(memTransport{})), url, get))
	off := testing.AllocsPerRun(100, mustRoundTrip(retryhttp.New(retryhttp.WithTransport(memTransport{}),
		retryhttp.WithDeadlineHeader(false)), url, get))
	on := testing.AllocsPerRun(100, mustRoundTrip(retryhttp.New(retryhttp.WithTransport(memTransport{}),
		retryhttp.WithDeadlineHeader(true)), url, get))
	assert.Equal(t, plain, off)
	assert.LessOrEqual(t, on-plain, 6.0, "%v allocations with the header, %v without", on, plain)
}
