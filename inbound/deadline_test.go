package inbound_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimeLeft(t *testing.T) {
	tests := []struct {
		give   []string
		want   time.Duration
		wantOK bool
	}{
		{give: []string{"250"}, want: 250 * time.Millisecond, wantOK: true},
		{give: []string{"0"}, want: 0, wantOK: true},
		{give: []string{"007"}, want: 7 * time.Millisecond, wantOK: true},
		{give: []string{"99999999"}, want: 99_999_999 * time.Millisecond, wantOK: true},
		{give: []string{"250", "250"}, want: 250 * time.Millisecond, wantOK: true},
		{give: nil},
		{give: []string{""}},
		{give: []string{"-5"}},
		{give: []string{"+5"}},
		{give: []string{"1.5"}},
		{give: []string{"5ms"}},
		{give: []string{"1e3"}},
		{give: []string{" 5"}},
		{give: []string{"5 "}},
		{give: []string{"0x10"}},
		{give: []string{"100000000"}}, // 9 digits
		{give: []string{"99999999999999999999999"}},
		{give: []string{"250", "100"}}, // several different values
		{give: []string{"٣"}},          // a digit, but not ASCII
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.give {
			h.Add(retryhttp.DeadlineHeader, v)
		}
		got, ok := inbound.TimeLeft(h)
		assert.Equal(t, tt.wantOK, ok, "%q", tt.give)
		assert.Equal(t, tt.want, got, "%q", tt.give)
	}
}

// deadlineOf serves one request carrying the header values give behind
// Deadline (and outer, if not nil), and returns how long the handler's
// context had left when it started, or -1 if it had no deadline.
func deadlineOf(t *testing.T, outer func(http.Handler) http.Handler, give ...string) time.Duration {
	t.Helper()
	left := make(chan time.Duration, 1)
	var h http.Handler = inbound.Deadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := r.Context().Deadline()
		if !ok {
			left <- -1
			return
		}
		left <- time.Until(d)
	}))
	if outer != nil {
		h = outer(h)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	for _, v := range give {
		req.Header.Add(retryhttp.DeadlineHeader, v)
	}
	res, err := plainClient(t).Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return <-left
}

// withTimeout is a server's own deadline, set outside Deadline.
func withTimeout(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

func TestDeadlineBoundsTheHandlersContext(t *testing.T) {
	left := deadlineOf(t, nil, "2000")
	assert.Greater(t, left, time.Second)
	assert.LessOrEqual(t, left, 2*time.Second)

	assert.Equal(t, time.Duration(-1), deadlineOf(t, nil), "no header, no deadline")
	assert.Equal(t, time.Duration(-1), deadlineOf(t, nil, "-1"), "garbage is ignored")
	assert.Equal(t, time.Duration(-1), deadlineOf(t, nil, "100000000"), "too long is ignored")
	assert.LessOrEqual(t, deadlineOf(t, nil, "0"), time.Duration(0), "the caller is gone")

	left = deadlineOf(t, withTimeout(time.Second), "99999999")
	assert.LessOrEqual(t, left, time.Second, "the server's own deadline stays: never extended")
	left = deadlineOf(t, withTimeout(time.Hour), "2000")
	assert.LessOrEqual(t, left, 2*time.Second, "the caller's shorter one wins")
}

// TestDeadlineTravels: client → S1 → S2, every Transport sending the
// header and S1 behind Deadline: S2 learns the client's deadline, less
// what S1 spent, and bounded by S1's attempt timeout.
func TestDeadlineTravels(t *testing.T) {
	got := make(chan string, 2)
	s2 := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(retryhttp.DeadlineHeader)
	}))
	defer s2.Close()
	for _, tt := range []struct {
		name           string
		attemptTimeout time.Duration
		max            int
	}{
		{"the client's deadline, less S1's work", 0, 3000 - 20},
		{"S1's attempt timeout", 500 * time.Millisecond, 500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			toS2 := retryhttp.New(retryhttp.WithDeadlineHeader(true), retryhttp.WithAttemptTimeout(tt.attemptTimeout))
			defer toS2.CloseIdleConnections()
			s1 := httptest.NewServer(inbound.Deadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(20 * time.Millisecond) // S1's own work
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, s2.URL, nil)
				res, err := toS2.RoundTrip(req)
				if !assert.NoError(t, err) {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				res.Body.Close()
			})))
			defer s1.Close()
			client := retryhttp.New(retryhttp.WithDeadlineHeader(true))
			defer client.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s1.URL, nil)
			res, err := client.RoundTrip(req)
			require.NoError(t, err)
			res.Body.Close()
			ms, err := strconv.Atoi(<-got)
			require.NoError(t, err)
			assert.LessOrEqual(t, ms, tt.max)
			assert.Greater(t, ms, tt.max-1000)
		})
	}
}

// FuzzTimeLeft: whatever the header says, no panic, a time left within the
// documented range, and a handler's context never given a deadline later
// than the server's own.
func FuzzTimeLeft(f *testing.F) {
	for _, v := range []string{"250", "0", "", "-1", "+1", "1.5", "5ms", " 5", "99999999", "100000000",
		"18446744073709551616", "0x10", "1e3", "٣", "\x00", "9223372036854775807"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{retryhttp.DeadlineHeader: {v}}
		left, ok := inbound.TimeLeft(h)
		if !ok {
			assert.Zero(t, left)
		}
		assert.GreaterOrEqual(t, left, time.Duration(0))
		assert.LessOrEqual(t, left, 99_999_999*time.Millisecond)

		own := time.Now().Add(time.Minute)
		ctx, cancel := context.WithDeadline(context.Background(), own)
		defer cancel()
		req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
		req.Header = h
		inbound.Deadline(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			d, has := r.Context().Deadline()
			assert.True(t, has)
			assert.False(t, d.After(own), "never later than the server's own")
		})).ServeHTTP(httptest.NewRecorder(), req)
	})
}
