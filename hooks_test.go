package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// events records what the hooks of a Transport see, one line per call:
//
//	attempt N: 503            an attempt and its status, or "error"
//	hedged attempt N: ...     an attempt of a hedged request
//	retry N (cause) in D      a decision to retry attempt N after D
//	hedge after N in D        a hedge sent with N attempts in flight
//	stop after N: reason      the stop, after N attempts
type events struct {
	mu   sync.Mutex
	got  []string
	last retryhttp.Decision // the stop
}

func (e *events) options() []retryhttp.Option {
	return []retryhttp.Option{retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: e.attempt, OnRetryDecision: e.decide})}
}

func (e *events) attempt(ai retryhttp.AttemptInfo) {
	a := ai.Attempt
	line := fmt.Sprintf("attempt %d: %s", a.Count, outcomeOf(a))
	if ai.Hedged {
		line = "hedged " + line
	}
	e.add(line)
}

func (e *events) decide(d retryhttp.Decision) {
	switch {
	case d.Hedge:
		e.add(fmt.Sprintf("hedge after %d in %v", d.Attempt.Count, d.Delay))
	case d.Retry:
		e.add(fmt.Sprintf("retry %d (%s) in %v", d.Attempt.Count, d.Cause(), d.Delay))
	default:
		e.mu.Lock()
		e.last = d
		e.mu.Unlock()
		e.add(fmt.Sprintf("stop after %d: %s", d.Attempt.Count, d.Reason))
	}
}

func (e *events) add(line string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, line)
}

func (e *events) lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func (e *events) stop() retryhttp.Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

func outcomeOf(a retryhttp.Attempt) string {
	if a.Res != nil {
		return fmt.Sprint(a.Res.StatusCode)
	}
	if errors.Is(a.Err, context.Canceled) {
		return "canceled"
	}
	return "error"
}

// observed is a Transport with recording hooks and logger, that does not
// wait between attempts (the delays chosen are still reported).
type observed struct {
	tr   *retryhttp.Transport
	ev   *events
	logs *recordingHandler
}

func newObserved(t *testing.T, opts ...retryhttp.Option) *observed {
	t.Helper()
	o := &observed{ev: &events{}, logs: &recordingHandler{}}
	opts = append(append(opts, o.ev.options()...), retryhttp.WithLogger(slog.New(o.logs)))
	o.tr = testkit.NewTransport(t, opts...)
	testkit.FakeWaits(o.tr)
	return o
}

// send sends req through the transport, closes the response and returns
// its status, or 0, and the error.
func (o *observed) send(req *http.Request) (int, error) {
	res, err := o.tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// delays is a DelayFn that waits 10ms times the attempt's number.
var delays = retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration {
	return time.Duration(a.Count) * 10 * time.Millisecond
})

func newGet(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

func TestHooksAndLogsOnEachOutcome(t *testing.T) {
	tests := []struct {
		name       string
		give       testkit.HandlerFn
		opts       []retryhttp.Option
		ctxTimeout time.Duration // 0: none
		wantStatus int
		wantEvents []string
		wantLogs   func(url string) []logRecord
	}{
		{
			name:       "success",
			give:       testkit.Always(200),
			wantStatus: 200,
			wantEvents: []string{"attempt 1: 200", "stop after 1: success"},
		},
		{
			name:       "not retryable",
			give:       testkit.Always(500),
			wantStatus: 500,
			wantEvents: []string{"attempt 1: 500", "stop after 1: not retryable"},
		},
		{
			name:       "retried then success",
			give:       testkit.StatusThen(503, 2),
			opts:       []retryhttp.Option{delays},
			wantStatus: 200,
			wantEvents: []string{
				"attempt 1: 503", "retry 1 (status) in 10ms",
				"attempt 2: 503", "retry 2 (status) in 20ms",
				"attempt 3: 200", "stop after 3: success",
			},
			wantLogs: func(url string) []logRecord {
				return []logRecord{retryLog(url, 1, 4, "10ms"), retryLog(url, 2, 4, "20ms")}
			},
		},
		{
			name:       "retries exhausted",
			give:       testkit.Always(503),
			opts:       []retryhttp.Option{delays, retryhttp.WithMaxRetries(2)},
			wantStatus: 503,
			wantEvents: []string{
				"attempt 1: 503", "retry 1 (status) in 10ms",
				"attempt 2: 503", "retry 2 (status) in 20ms",
				"attempt 3: 503", "stop after 3: retries exhausted",
			},
			wantLogs: func(url string) []logRecord {
				return []logRecord{
					retryLog(url, 1, 3, "10ms"), retryLog(url, 2, 3, "20ms"),
					giveUpLog(url, 3, 3, "503", "retries exhausted"),
				}
			},
		},
		{
			name: "budget refused",
			give: testkit.Always(503),
			opts: []retryhttp.Option{delays,
				retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, NoParking: true}))},
			wantStatus: 503,
			wantEvents: []string{
				"attempt 1: 503", "retry 1 (status) in 10ms",
				"attempt 2: 503", "stop after 2: budget refused",
			},
			wantLogs: func(url string) []logRecord {
				return []logRecord{retryLog(url, 1, 4, "10ms"), giveUpLog(url, 2, 4, "503", "budget refused")}
			},
		},
		{
			name:       "delay too long",
			give:       testkit.Always(503),
			opts:       []retryhttp.Option{retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 2 * time.Minute })},
			wantStatus: 503,
			wantEvents: []string{"attempt 1: 503", "stop after 1: delay too long"},
			wantLogs: func(url string) []logRecord {
				return []logRecord{giveUpLog(url, 1, 4, "503", "delay too long")}
			},
		},
		{
			name:       "deadline too close",
			give:       testkit.Always(503),
			opts:       []retryhttp.Option{retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 30 * time.Second })},
			ctxTimeout: 10 * time.Second,
			wantStatus: 503,
			wantEvents: []string{"attempt 1: 503", "stop after 1: deadline too close"},
			wantLogs: func(url string) []logRecord {
				return []logRecord{giveUpLog(url, 1, 4, "503", "deadline too close")}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, tt.give)
			o := newObserved(t, tt.opts...)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctxTimeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
			}
			defer cancel()

			status, err := o.send(newGet(t, ctx, srv.URL+"/p"))
			require.NoError(t, err)
			assert.Equal(t, tt.wantStatus, status)
			assert.Equal(t, tt.wantEvents, o.ev.lines())
			var wantLogs []logRecord
			if tt.wantLogs != nil {
				wantLogs = tt.wantLogs(srv.URL + "/p")
			}
			assert.Equal(t, wantLogs, o.logs.all())
		})
	}
}

func TestHooksStopCarriesWhatRoundTripReturns(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	o := newObserved(t, testkit.NoDelay, retryhttp.WithMaxRetries(1))
	req := newGet(t, context.Background(), srv.URL)

	res, err := o.tr.RoundTrip(req)
	require.NoError(t, err)
	defer res.Body.Close()

	stop := o.ev.stop()
	assert.False(t, stop.Retry)
	assert.Equal(t, retryhttp.StopRetriesExhausted, stop.Reason)
	assert.Equal(t, 2, stop.Attempt.Count)
	assert.Same(t, res, stop.Attempt.Res, "the response returned")
	assert.Same(t, req, stop.Attempt.Req, "the caller's request")
	assert.Equal(t, 1, stop.MaxRetries)
	assert.Zero(t, stop.Delay)
	assert.Equal(t, "", stop.Cause())
}

func TestHooksDeadBackendExhaustsWithError(t *testing.T) {
	url := testkit.DeadURL(t)
	o := newObserved(t, delays, retryhttp.WithMaxRetries(1))

	_, err := o.send(newGet(t, context.Background(), url))
	require.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	assert.Equal(t, []string{
		"attempt 1: error", "retry 1 (connection) in 10ms",
		"attempt 2: error", "stop after 2: retries exhausted",
	}, o.ev.lines())
	assert.ErrorIs(t, o.ev.stop().Attempt.Err, retryhttp.ErrRetriesExhausted, "the error returned")

	logs := o.logs.all()
	require.Len(t, logs, 2)
	assert.Equal(t, "connection", logs[0].Attrs["reason"])
	assert.Contains(t, logs[0].Attrs["error"], "connection refused")
	assert.NotContains(t, logs[0].Attrs, "status")
	assert.Equal(t, slog.LevelWarn, logs[1].Level)
	assert.Contains(t, logs[1].Attrs["error"], "retries exhausted")
}

func TestHooksCanceledDuringWait(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	o := newObserved(t, delays)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The caller gives up while the transport waits, on a clock that
	// never moves.
	retryhttp.WithClock(testkit.OnWait{Clock: retryhttptest.NewManualClock(time.Now()), Fn: cancel})(o.tr)

	_, err := o.send(newGet(t, ctx, srv.URL))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{
		"attempt 1: 503", "retry 1 (status) in 10ms", "stop after 1: canceled",
	}, o.ev.lines())
	logs := o.logs.all()
	require.Len(t, logs, 1, "the retry only: a cancelled request is not a give-up")
	assert.Equal(t, "retryhttp: retrying", logs[0].Msg)
}

// failingBody fails every read.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }
func (failingBody) Close() error             { return nil }

func TestHooksBodyErrorStopsAfterItsAttempt(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(200))
	o := newObserved(t)
	req, err := http.NewRequest(http.MethodPut, srv.URL, failingBody{})
	require.NoError(t, err)

	_, err = o.send(req)
	require.ErrorIs(t, err, retryhttp.ErrBufferingBody)
	// The body is streamed as the attempt reads it: its error ends that
	// attempt, and the request, as the caller's fault.
	assert.Equal(t, []string{"attempt 1: error", "stop after 1: error"}, o.ev.lines())
	assert.ErrorIs(t, o.ev.stop().Attempt.Err, retryhttp.ErrBufferingBody)
	assert.Empty(t, o.logs.all())
}

func TestHooksCircuitOpen(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	var changes transitions
	o := newObserved(t, retryhttp.WithMaxRetries(0),
		retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: changes.record}), // before the breaker: order does not matter
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour}))

	status, err := o.send(newGet(t, context.Background(), srv.URL+"/x?token=s3cr3t"))
	require.NoError(t, err)
	assert.Equal(t, 503, status)
	assert.Equal(t, []string{"closed→open"}, changes.seen())

	_, err = o.send(newGet(t, context.Background(), srv.URL+"/x?token=s3cr3t"))
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	assert.Equal(t, []string{
		"attempt 1: 503", "stop after 1: not retryable",
		"stop after 0: circuit open",
	}, o.ev.lines())
	assert.EqualValues(t, 1, srv.Attempts.Load())

	logs := o.logs.all()
	require.Len(t, logs, 1)
	assert.Equal(t, logRecord{slog.LevelWarn, "retryhttp: giving up", map[string]string{
		"method": "GET", "url": srv.URL + "/x", "attempt": "0", "max_attempts": "1",
		"error": err.Error(), "reason": "circuit open",
	}}, logs[0])
}

// TestHooksCircuitStateChangeInOptionOrder checks that OnCircuitStateChange
// hooks run in the order of their options, whether installed before or
// after WithCircuitBreaker.
func TestHooksCircuitStateChangeInOptionOrder(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	var order []string
	var mu sync.Mutex
	note := func(who string) func(string, retryhttp.CircuitState, retryhttp.CircuitState) {
		return func(host string, from, to retryhttp.CircuitState) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, who+" "+host+" "+from.String()+"→"+to.String())
		}
	}
	tr := testkit.NewTransport(t, retryhttp.WithMaxRetries(0),
		retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: note("hook1")}), // before the breaker
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour,
		}),
		retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: note("hook2")}),
		retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: nil}),
		retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: note("hook3")}))

	_, err := (&observed{tr: tr}).send(newGet(t, context.Background(), srv.URL))
	require.NoError(t, err)
	host := hostmap.KeyOf(mustRequest(srv.URL)).String()
	assert.Equal(t, []string{
		"hook1 " + host + " closed→open", "hook2 " + host + " closed→open", "hook3 " + host + " closed→open",
	}, order)
}

func TestHooksHedgedRequest(t *testing.T) {
	hs := newHedgeServer(t, slowFirst)
	ev := &events{}
	_, tr := newHedgeClient(t, append(ev.options(), retryhttp.WithHedging(20*time.Millisecond, 1))...)

	res, err := tr.RoundTrip(newGet(t, context.Background(), hs.URL))
	require.NoError(t, err)
	assert.Equal(t, "attempt 2", testkit.ReadAll(t, res)) // closing waits for the loser

	got := ev.lines()
	require.Len(t, got, 4)
	assert.Equal(t, []string{"hedge after 1 in 20ms", "hedged attempt 2: 200"}, got[:2])
	// The loser is collected while the caller reads the winner's body: its
	// report and the stop come in either order.
	assert.ElementsMatch(t, []string{"stop after 2: success", "hedged attempt 1: canceled"}, got[2:])
}

func TestHooksHedgedFailureReplacedAtOnce(t *testing.T) {
	hs := newHedgeServer(t, func(_ *hedgeServer, n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	ev := &events{}
	_, tr := newHedgeClient(t, append(ev.options(), retryhttp.WithHedging(time.Hour, 1))...)

	res, err := tr.RoundTrip(newGet(t, context.Background(), hs.URL))
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, []string{
		"hedged attempt 1: 503", "retry 1 (status) in 0s", "hedged attempt 2: 200", "stop after 2: success",
	}, ev.lines())
}

// TestHooksCalledInOptionOrder checks that each WithHooks adds to the hooks
// installed before, and that hooks of one kind run in the order of the
// options, whatever the other kinds in the same Hooks.
func TestHooksCalledInOptionOrder(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(200))
	var got []string
	tr := testkit.NewTransport(t,
		retryhttp.WithHooks(retryhttp.Hooks{
			OnAttempt:       func(retryhttp.AttemptInfo) { got = append(got, "a1") },
			OnRetryDecision: func(retryhttp.Decision) { got = append(got, "d1") },
		}),
		retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: func(retryhttp.AttemptInfo) { got = append(got, "a2") }}),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(retryhttp.Decision) { got = append(got, "d2") }}))
	_, err := (&observed{tr: tr}).send(newGet(t, context.Background(), srv.URL))
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2", "d1", "d2"}, got)
}

func TestDecisionCause(t *testing.T) {
	res := &http.Response{StatusCode: 503}
	tests := []struct {
		name string
		give retryhttp.Decision
		want string
	}{
		{"stop", retryhttp.Decision{Reason: retryhttp.StopSuccess, Attempt: retryhttp.Attempt{Res: res}}, ""},
		{"hedge", retryhttp.Decision{Retry: true, Hedge: true}, "hedge"},
		{"status", retryhttp.Decision{Retry: true, Attempt: retryhttp.Attempt{Res: res}}, "status"},
		{"timeout", retryhttp.Decision{Retry: true, Attempt: retryhttp.Attempt{Err: retryhttp.ErrAttemptTimeout}}, "timeout"},
		{"dns", retryhttp.Decision{Retry: true, Attempt: retryhttp.Attempt{Err: &net.DNSError{Err: "no such host", Name: "x"}}}, "dns"},
		{"connection", retryhttp.Decision{Retry: true, Attempt: retryhttp.Attempt{Err: io.ErrUnexpectedEOF}}, "connection"},
		{"error", retryhttp.Decision{Retry: true, Attempt: retryhttp.Attempt{Err: errors.New("odd")}}, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.give.Cause())
		})
	}
}

// TestObservabilityUnsetAddsNoAllocs checks that a transport without hooks
// or logger, whether never set or set to nil, allocates on the happy path
// exactly what the bare base transport does; and that no-op hooks and a
// logger whose level hides retries add nothing either, since a request that
// succeeds at once writes no record.
func TestObservabilityUnsetAddsNoAllocs(t *testing.T) {
	const url = "http://example.test/"
	base := retryhttp.WithTransport(memTransport{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tests := []struct {
		name string
		give *retryhttp.Transport
	}{
		{"unset", retryhttp.New(base)},
		{"set to nil", retryhttp.New(base, retryhttp.WithLogger(nil), retryhttp.WithHooks(retryhttp.Hooks{}),
			retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: nil, OnRetryDecision: nil, OnPark: nil, OnCircuitStateChange: nil}))},
		{"no-op hooks and a quiet logger", retryhttp.New(base, retryhttp.WithLogger(quiet),
			retryhttp.WithHooks(retryhttp.Hooks{
				OnAttempt:       func(retryhttp.AttemptInfo) {},
				OnRetryDecision: func(retryhttp.Decision) {},
			}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, roundTripOnce(tt.give, url, newGET))
			bare := testing.AllocsPerRun(100, mustRoundTrip(memTransport{}, url, newGET))
			ours := testing.AllocsPerRun(100, mustRoundTrip(tt.give, url, newGET))
			assert.Positive(t, bare)
			assert.LessOrEqual(t, ours, bare, "allocations per GET: bare %v, retryhttp %v", bare, ours)
		})
	}
}
