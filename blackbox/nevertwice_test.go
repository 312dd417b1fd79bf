package blackbox

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Never twice: a request the transport would not retry is sent at most once
// by the layers below it (issue 11). The sequence that broke it, seen behind
// haproxy and reproduced here on loopback: a request on a reused keep-alive
// connection reaches a server that acts on it and dies before answering.
// net/http replays a request it deems replayable on a new connection (a GET,
// or any request carrying Idempotency-Key), then returns only the replay's
// outcome.

// neverTwiceKinds are the requests of the never-twice probe, with the side
// effects each may cause when its first send is acted on and lost.
var neverTwiceKinds = []struct {
	name    string
	method  string
	body    string
	header  http.Header
	options []retryhttp.Option
	// want is the side effects allowed: 1 for a request the transport
	// would not retry, 2 where a second run is licensed (an idempotent
	// method, a caller's key, keys known to be honoured).
	want int64
}{
	{name: "POST, injected key", method: http.MethodPost, body: "charge", want: 1},
	{name: "POST without body, injected key", method: http.MethodPost, want: 1},
	{name: "POST, injected X-Idempotency-Key", method: http.MethodPost, body: "charge", want: 1,
		options: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Header: "X-Idempotency-Key"})}},
	{name: "PATCH, injected key, retries off", method: http.MethodPatch, body: "charge", want: 1,
		options: []retryhttp.Option{retryhttp.WithMaxRetries(0)}},
	{name: "POST, keys off", method: http.MethodPost, body: "charge", want: 1,
		options: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true})}},
	{name: "POST, caller's key", method: http.MethodPost, body: "charge", want: 2,
		header: http.Header{"Idempotency-Key": {"caller-key"}}},
	{name: "POST, injected key honoured", method: http.MethodPost, body: "charge", want: 2,
		options: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true})}},
	{name: "GET", method: http.MethodGet, want: 2},
}

// TestNeverTwiceServerDiesThenRefuses: the server acts on the request and
// dies; the port refuses connections (net/http's replay, if any, fails to
// dial); then a restarted server answers (the transport's retry, if any,
// reaches it). A POST the transport would not retry runs once.
func TestNeverTwiceServerDiesThenRefuses(t *testing.T) {
	for _, k := range neverTwiceKinds {
		t.Run(k.name, func(t *testing.T) {
			srv := newDyingServer(t, true)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr := retryhttp.New(append([]retryhttp.Option{retryhttp.WithTransport(base),
				retryhttp.WithRetryBudget(nil)}, k.options...)...)
			restarted := false
			retryhttp.WithClock(testkit.OnWait{Clock: retryhttptest.NewClock(time.Now()), Fn: func() {
				if !restarted { // the refusing window ends during the wait
					restarted = true
					srv.restart()
				}
			}})(tr)
			warm(t, tr, srv.url())

			res, err := tr.RoundTrip(neverTwiceRequest(t, k.method, srv.url(), k.body, k.header))
			if err == nil {
				testkit.ReadAll(t, res)
			}
			assert.Equal(t, k.want, srv.effects(), "side effects at the server (err %v)", err)
			if k.want == 1 {
				require.Error(t, err, "the caller learns the request failed")
				assert.NotErrorIs(t, err, syscall.ECONNREFUSED, "a refused replay must not be reported as the request's fate")
			}
		})
	}
}

// TestNeverTwiceServerDiesThenAnswers: the server acts on the request and
// dies, and another answers at once on the same port (a backend restarted
// behind a proxy). Only net/http's own replay could send the request again.
func TestNeverTwiceServerDiesThenAnswers(t *testing.T) {
	for _, k := range neverTwiceKinds {
		t.Run(k.name, func(t *testing.T) {
			srv := newDyingServer(t, false)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr := retryhttp.New(append([]retryhttp.Option{retryhttp.WithTransport(base),
				retryhttp.WithRetryBudget(nil)}, k.options...)...)
			testkit.FakeWaits(tr)
			warm(t, tr, srv.url())

			res, err := tr.RoundTrip(neverTwiceRequest(t, k.method, srv.url(), k.body, k.header))
			if err == nil {
				testkit.ReadAll(t, res)
			}
			assert.Equal(t, k.want, srv.effects(), "side effects at the server (err %v)", err)
			if k.want == 1 {
				assert.Error(t, err, "the caller learns the request failed")
			}
		})
	}
}

// warm makes the keep-alive connection that the request under test reuses.
func warm(t *testing.T, tr http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/warm", nil)
	require.NoError(t, err)
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
}

func neverTwiceRequest(t *testing.T, method, url, body string, h http.Header) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body) // GetBody set: net/http could replay it
	}
	req, err := http.NewRequest(method, url+"/act", r)
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	return req
}

// replayingBase stands for any layer below the transport that re-sends a
// request by itself: it sends the request once on a real connection (the
// server acts and closes it), then "replays" it to a port that refuses, and
// returns only the replay's dial error, as net/http does.
type replayingBase struct {
	real    *http.Transport
	refused string
}

func (b replayingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := b.real.RoundTrip(req)
	if err == nil {
		return res, nil
	}
	var d net.Dialer
	c, dialErr := d.DialContext(req.Context(), "tcp", b.refused)
	if dialErr == nil {
		c.Close()
		return nil, err
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: dialErr}
}

// TestDialErrorAfterWriteIsNoProof: a dial error is proof that a request
// never left only if nothing below sent it first. Whatever base transport
// replays a written POST and fails to dial, the transport does not retry it.
func TestDialErrorAfterWriteIsNoProof(t *testing.T) {
	srv := testkit.NewRawServer(t, func(n int64) testkit.Reply { return testkit.ReplyReset })
	real := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(real.CloseIdleConnections)
	tr := retryhttp.New(retryhttp.WithTransport(replayingBase{real: real, refused: testkit.RefusedAddr(t)}),
		retryhttp.WithRetryBudget(nil))
	testkit.FakeWaits(tr)

	_, err := tr.RoundTrip(neverTwiceRequest(t, http.MethodPost, srv.URL(), "charge", nil))
	require.Error(t, err)
	assert.Equal(t, int64(1), srv.Requests.Load(), "the POST was written once and is not retried")

	// A GET written the same way is retried: it is idempotent.
	srv2 := testkit.NewRawServer(t, func(n int64) testkit.Reply { return testkit.ReplyReset })
	tr2 := retryhttp.New(retryhttp.WithTransport(replayingBase{real: real, refused: testkit.RefusedAddr(t)}),
		retryhttp.WithRetryBudget(nil))
	testkit.FakeWaits(tr2)
	_, err = tr2.RoundTrip(neverTwiceRequest(t, http.MethodGet, srv2.URL(), "", nil))
	require.Error(t, err)
	assert.Equal(t, int64(1+retryhttp.DefaultMaxRetries), srv2.Requests.Load())

	// A POST that never reached any server is still retried, as always.
	tr3 := retryhttp.New(retryhttp.WithRetryBudget(nil))
	testkit.FakeWaits(tr3)
	var dials atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { dials.Add(1) },
	})
	req := neverTwiceRequest(t, http.MethodPost, "http://"+testkit.RefusedAddr(t), "charge", nil).WithContext(ctx)
	_, err = tr3.RoundTrip(req)
	require.Error(t, err)
	assert.Equal(t, int64(1+retryhttp.DefaultMaxRetries), dials.Load(), "a refused POST is retried; the caller's trace still runs")
	tr3.CloseIdleConnections()
}

// TestInjectedKeyReadable: the injected key is stored so that net/http does
// not replay the request, yet IdempotencyKey reads it from the request as
// sent, and a server reads it under its usual name.
func TestInjectedKeyReadable(t *testing.T) {
	var atServer, inPolicy atomic.Value
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		atServer.Store(r.Header.Get("Idempotency-Key"))
	})
	tr := testkit.NewTransport(t, retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
		inPolicy.Store(retryhttp.IdempotencyKey(a.Req))
		return false
	}))
	res, err := tr.RoundTrip(neverTwiceRequest(t, http.MethodPost, srv.URL, "x", nil))
	require.NoError(t, err)
	testkit.ReadAll(t, res)
	assert.Len(t, atServer.Load(), 36, "a UUID under Idempotency-Key")
	assert.Equal(t, atServer.Load(), inPolicy.Load())

	caller := neverTwiceRequest(t, http.MethodPost, srv.URL, "x", nil)
	caller.Header["x-idempotency-key"] = []string{"mine"}
	assert.Equal(t, "mine", retryhttp.IdempotencyKey(caller))
	assert.Equal(t, "", retryhttp.IdempotencyKey(neverTwiceRequest(t, http.MethodPost, srv.URL, "", nil)))
	assert.Equal(t, "", retryhttp.IdempotencyKey(nil))
}

// Regression: with http.Client.Timeout, the stop reported to hooks raced:
// some timed-out requests reported "not retryable", since net/http's own
// cancellation (through Request.Cancel) can end an attempt an instant before
// the request's context reports its deadline. A request stopped by its
// caller's deadline reports StopCanceled, always.
func TestClientTimeoutReportsCanceled(t *testing.T) {
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	var mu sync.Mutex
	reasons := map[retryhttp.StopReason]int{}
	tr := testkit.NewTransport(t, retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if !d.Retry {
			mu.Lock()
			reasons[d.Reason]++
			mu.Unlock()
		}
	}}))
	c := &http.Client{Transport: tr, Timeout: 30 * time.Millisecond}
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Get(srv.URL)
			if assert.Error(t, err) {
				assert.True(t, retryhttp.IsTimeoutErr(err), "%v", err)
			} else {
				res.Body.Close()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[retryhttp.StopReason]int{retryhttp.StopCanceled: n}, reasons)
}

// TestWriteWatchStillStopsRetry: a POST whose headers were written to a
// loopback server that then reset the connection, and that a base below
// the transport replayed into a dial error, is not retried, with keys on
// (the copy holds the watch), off (the watch holds the copy), and with a
// ClientTrace of the caller's (composed with the watch's), which still runs.
func TestWriteWatchStillStopsRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keys  bool
		trace bool
	}{
		{"keys on", true, false},
		{"keys off", false, false},
		{"keys on, caller trace", true, true},
		{"keys off, caller trace", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testkit.NewRawServer(t, func(n int64) testkit.Reply { return testkit.ReplyReset })
			real := &http.Transport{DisableKeepAlives: true}
			t.Cleanup(real.CloseIdleConnections)
			tr := retryhttp.New(retryhttp.WithTransport(replayingBase{real: real, refused: testkit.RefusedAddr(t)}),
				retryhttp.WithRetryBudget(nil), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: !tc.keys}))
			testkit.FakeWaits(tr)
			req := neverTwiceRequest(t, http.MethodPost, srv.URL(), "charge", nil)
			var wrote atomic.Int64
			if tc.trace {
				req = req.WithContext(httptrace.WithClientTrace(context.Background(),
					&httptrace.ClientTrace{WroteHeaders: func() { wrote.Add(1) }}))
			}
			res, err := tr.RoundTrip(req)
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Contains(t, err.Error(), "resent by a lower layer", "the dial error is marked as following a write")
			assert.Equal(t, int64(1), srv.Requests.Load(), "the POST was written once and is not retried")
			if tc.trace {
				assert.Equal(t, int64(1), wrote.Load(), "the caller's trace still runs")
			}
		})
	}
}

// dyingServer is a testkit.RawServer that dies: request 1 warms a keep-alive
// connection up; request 2, the one under test, is acted on, and then the
// server closes the connection without answering and, with refuse, its
// listener, so that the port refuses connections until restart. Every
// request after the warm-up counts as a side effect, the restarted
// server's included.
type dyingServer struct {
	t       *testing.T
	first   atomic.Pointer[testkit.RawServer]
	servers []*testkit.RawServer // the first, and the restarted one
}

func newDyingServer(t *testing.T, refuse bool) *dyingServer {
	t.Helper()
	d := &dyingServer{t: t}
	first := testkit.NewRawServer(t, func(n int64) testkit.Reply {
		if n != 2 {
			return testkit.ReplyWith(http.StatusOK, []byte("ok"))
		}
		return func(*net.TCPConn) bool { // die before answering
			if refuse {
				d.first.Load().Listener().Close()
			}
			return false
		}
	})
	d.first.Store(first)
	d.servers = []*testkit.RawServer{first}
	return d
}

func (d *dyingServer) url() string { return d.servers[0].URL() }

// restart listens again on the same port, as a restarted server does.
func (d *dyingServer) restart() {
	d.servers = append(d.servers, testkit.NewRawServerAt(d.t, d.servers[0].Listener().Addr().String(),
		func(int64) testkit.Reply { return testkit.ReplyWith(http.StatusOK, []byte("ok")) }))
}

// effects returns the side effects so far: every request but the warm-up.
func (d *dyingServer) effects() int64 {
	n := int64(-1)
	for _, s := range d.servers {
		n += s.Requests.Load()
	}
	return n
}
