package retryhttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bodies without GetBody are streamed to the first attempt as they come,
// with a copy kept for retries (teebody.go). The tests below write such a
// body through an io.Pipe, in steps that wait for the server: a transport
// that read the body before sending would wait forever, so each test
// bounds its wait and fails instead.

// pipeBody is a body written step by step by the test: its type hides the
// pipe, so http.NewRequest sets no GetBody. It counts its Close calls.
type pipeBody struct {
	*io.PipeReader
	closes chan struct{}
}

func newPipeBody() (*pipeBody, *io.PipeWriter) {
	r, w := io.Pipe()
	return &pipeBody{PipeReader: r, closes: make(chan struct{}, 8)}, w
}

func (b *pipeBody) Close() error {
	b.closes <- struct{}{}
	return b.PipeReader.Close()
}

// closedOnce asserts that the caller's body was closed exactly once.
func (b *pipeBody) closedOnce(t *testing.T) {
	t.Helper()
	select {
	case <-b.closes:
	case <-time.After(5 * time.Second):
		t.Fatal("the caller's body was never closed")
	}
	select {
	case <-b.closes:
		t.Error("the caller's body was closed twice")
	case <-time.After(10 * time.Millisecond):
	}
}

// waitFor waits for c, failing the test after a few seconds.
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s (was the body read to its end before it was sent?)", what)
	}
}

// echoAfterFirst reads the first 5 bytes of the body, closes gotFirst,
// then echoes the whole body once it ends.
func echoAfterFirst(gotFirst chan struct{}) testkit.HandlerFn {
	return func(_ int64, w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		_, _ = io.ReadFull(r.Body, buf)
		close(gotFirst)
		rest, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append(buf, rest...))
	}
}

// writeAfterFirst writes "first", waits for the server to have read it
// (gotFirst closed), then writes rest and ends the body.
func writeAfterFirst(w *io.PipeWriter, gotFirst <-chan struct{}, rest string) {
	_, _ = io.WriteString(w, "first")
	<-gotFirst
	_, _ = io.WriteString(w, rest)
	w.Close()
}

func TestStreamedBodyReachesServerBeforeItEnds(t *testing.T) {
	gotFirst := make(chan struct{})
	srv := testkit.NewCountingServer(t, echoAfterFirst(gotFirst))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPost, srv.URL, body)
	require.NoError(t, err)

	go writeAfterFirst(w, gotFirst, ", then the rest")
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)

	waitFor(t, gotFirst, "first bytes at the server")
	assert.Equal(t, "first, then the rest", testkit.ReadAll(t, res))
	body.closedOnce(t)
}

func TestFullDuplexBodyWaitsForResponseHeaders(t *testing.T) {
	// An HTTP/2 bidirectional stream: the server answers at once and
	// echoes the body as it comes.
	srv := testkit.StartServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		buf := make([]byte, 64)
		for {
			n, err := r.Body.Read(buf)
			_, _ = w.Write(buf[:n])
			_ = http.NewResponseController(w).Flush()
			if err != nil {
				return
			}
		}
	}, true, nil)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithTransport(srv.Client().Transport))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, w := newPipeBody()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	require.NoError(t, err)

	// The body's writer waits for the response headers, as a
	// bidirectional stream does: RoundTrip must return before the body
	// ends.
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer res.Body.Close()
	for _, msg := range []string{"ping", "pong"} {
		_, err := io.WriteString(w, msg)
		require.NoError(t, err)
		got := make([]byte, len(msg))
		_, err = io.ReadFull(res.Body, got)
		require.NoError(t, err)
		assert.Equal(t, msg, string(got), "echoed while the body is open")
	}
	require.NoError(t, w.Close())
	rest, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Empty(t, rest)
	body.closedOnce(t)
}

func TestStreamedBodyRetriedWhole(t *testing.T) {
	srv := newChecksumServer(t, 503)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(2))
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPut, srv.URL, body)
	require.NoError(t, err)
	data := testkit.Payload(100 << 10)
	go func() {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 7<<10)
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Close()
	}()

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	sums, lens := srv.received()
	assert.Equal(t, testkit.Repeat(len(data), 3), lens, "the whole body on every attempt")
	assert.Equal(t, testkit.Repeat(sha256.Sum256(data), 3), sums)
	body.closedOnce(t)
}

func TestStreamedBodyContinuesAfterLostConnection(t *testing.T) {
	// Attempt 1 is cut after the server read the first half: the retry
	// sends that half from the copy, then the rest from the caller's body,
	// which the writer sends only after the cut.
	cut := make(chan struct{})
	var got []byte
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			buf := make([]byte, 4)
			_, _ = io.ReadFull(r.Body, buf)
			conn, _, err := http.NewResponseController(w).Hijack()
			require.NoError(t, err)
			require.NoError(t, conn.(*net.TCPConn).SetLinger(0))
			conn.Close() // a reset
			close(cut)
			return
		}
		got, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	tr := testkit.NewTransport(t, testkit.NoDelay)
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPut, srv.URL, body)
	require.NoError(t, err)
	go func() {
		_, _ = io.WriteString(w, "head")
		<-cut
		_, _ = io.WriteString(w, "+tail")
		w.Close()
	}()

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)

	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, "head+tail", string(got), "the copy, then the rest")
	assert.EqualValues(t, 2, srv.Attempts.Load())
	body.closedOnce(t)
}

func TestStreamedBodyOverLimitSaysWhyNotRetried(t *testing.T) {
	// A PUT whose connection is reset after the server read it is worth a
	// retry; its body outgrew the limit, so none is sent, and the error
	// says why.
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		require.NoError(t, err)
		require.NoError(t, conn.(*net.TCPConn).SetLinger(0))
		conn.Close()
	})
	var why retryhttp.StopReason
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithBodyBufferLimit(16),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { why = d.Reason }}))
	body := &testkit.CloseBody{Reader: bytes.NewReader(testkit.Payload(64))}

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, srv.URL, body))

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrBodyNotReplayable)
	assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF),
		"the attempt's own error is reached too: %v", err)
	assert.Equal(t, retryhttp.StopBodyNotReplayable, why)
	assert.Equal(t, "body not replayable", why.String())
	assert.EqualValues(t, 1, srv.Attempts.Load())
	assert.Eventually(t, body.Closed.Load, 5*time.Second, time.Millisecond)
}

func TestStreamedBodyErrorMidReadEndsRequest(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(200))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPut, srv.URL, body)
	require.NoError(t, err)
	errDisk := errors.New("disk on fire")
	go func() {
		_, _ = io.WriteString(w, "partial")
		w.CloseWithError(errDisk)
	}()

	res, err := tr.RoundTrip(req)

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrBufferingBody)
	assert.ErrorIs(t, err, errDisk)
	assert.LessOrEqual(t, srv.Attempts.Load(), int64(1), "not retried")
	body.closedOnce(t)
}

func TestReverseProxyStreamsUpload(t *testing.T) {
	// httputil.ReverseProxy's outbound request has no GetBody: its body is
	// the client's, read as it arrives.
	gotFirst := make(chan struct{})
	upstream := testkit.NewCountingServer(t, echoAfterFirst(gotFirst))
	target, err := url.Parse(upstream.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = testkit.NewTransport(t, testkit.NoDelay)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	pr, pw := io.Pipe()
	go writeAfterFirst(pw, gotFirst, " and the rest")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	res, err := client.Post(front.URL, "text/plain", pr)
	require.NoError(t, err)

	waitFor(t, gotFirst, "first bytes at the upstream")
	assert.Equal(t, "first and the rest", testkit.ReadAll(t, res))
}

func TestStreamedBodyErrorOutcomeIsTheBaseTransports(t *testing.T) {
	// The caller's body fails while attempt 1 reads it. The base transport
	// that returns the read error ends the request with it; one that
	// swallows it and answers has its answer judged as any other, the body
	// no longer replayable: a 200 is a success, a 503 is not retried.
	errDisk := errors.New("disk on fire")
	for _, tt := range []struct {
		name    string
		status  int // 0: the base transport returns the read error
		wantWhy retryhttp.StopReason
	}{
		{"read error returned", 0, retryhttp.StopError},
		{"read error swallowed, 200", 200, retryhttp.StopSuccess},
		{"read error swallowed, 503", 503, retryhttp.StopBodyNotReplayable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sent int
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent++
				_, err := io.ReadAll(r.Body)
				r.Body.Close()
				if tt.status == 0 {
					return nil, err
				}
				return &http.Response{StatusCode: tt.status, Body: http.NoBody, Request: r}, nil
			})
			var stop retryhttp.Decision
			tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithTransport(base),
				retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { stop = d }}))
			body := &testkit.CloseBody{Reader: io.MultiReader(bytes.NewReader([]byte("partial")), iotest.ErrReader(errDisk))}

			res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, "http://example.invalid/", body))

			assert.Equal(t, 1, sent, "not retried")
			assert.Equal(t, tt.wantWhy, stop.Reason)
			assert.Equal(t, 1, stop.Attempt.Count, "attempt 1 was sent")
			if tt.status == 0 {
				assert.Nil(t, res)
				assert.ErrorIs(t, err, retryhttp.ErrBufferingBody)
				assert.ErrorIs(t, err, errDisk)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.status, res.StatusCode, "the base transport's answer")
			res.Body.Close()
		})
	}
}
