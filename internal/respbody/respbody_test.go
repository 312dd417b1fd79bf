package respbody

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// body is a response body that counts the bytes read from it and whether
// it was closed; after its content it returns err (io.EOF if nil).
type body struct {
	r      io.Reader
	err    error
	read   int
	closed atomic.Bool
}

func newBody(n int, err error) *body {
	return &body{r: bytes.NewReader(bytes.Repeat([]byte("x"), n)), err: err}
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *body) Close() error { b.closed.Store(true); return nil }

func response(b io.ReadCloser, contentLength int64) *http.Response {
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: b, ContentLength: contentLength}
}

func TestDiscardNilIsLeftAlone(t *testing.T) {
	Discard(nil, nil)
	res := response(nil, 0)
	Discard(res, nil)
	assert.Nil(t, res.Body)
}

func TestDiscardDrainsShortBody(t *testing.T) {
	for _, cl := range []int64{100, -1} {
		b := newBody(100, nil)
		Discard(response(b, cl), nil)
		assert.Equal(t, 100, b.read, "ContentLength %d", cl)
		assert.True(t, b.closed.Load())
	}
}

// A chunked body of exactly MaxDrain bytes is read to its end, so that its
// connection can be reused; a longer one is read no further than one byte
// past the bound.
func TestDiscardReadsAtMostOnePastMaxDrain(t *testing.T) {
	b := newBody(MaxDrain, nil)
	Discard(response(b, -1), nil)
	assert.Equal(t, MaxDrain, b.read)
	assert.True(t, b.closed.Load())

	b = newBody(10*MaxDrain, nil)
	Discard(response(b, -1), nil)
	assert.Equal(t, MaxDrain+1, b.read)
	assert.True(t, b.closed.Load())
}

func TestDiscardLongOrEmptyBodyIsClosedUnread(t *testing.T) {
	b := newBody(MaxDrain+1, nil)
	Discard(response(b, MaxDrain+1), nil)
	assert.Zero(t, b.read)
	assert.True(t, b.closed.Load())

	// http.NoBody cannot record a Close; it must simply not be read.
	res := response(http.NoBody, 0)
	Discard(res, nil)
	assert.Equal(t, http.NoBody, res.Body)
}

// rearm replaces Discard's own timer: here it cuts the stalled body at
// once, as an attempt's timer firing would.
func TestDiscardRearmBoundsTheDrain(t *testing.T) {
	pr, pw := io.Pipe()
	var got []time.Duration
	rearm := func(d time.Duration) {
		got = append(got, d)
		pw.CloseWithError(errors.New("attempt timer fired"))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Discard(response(pr, -1), rearm)
	}()
	select {
	case <-done:
	case <-time.After(MaxDrainTime / 2):
		t.Fatal("Discard waited for its own timer instead of rearm's")
	}
	assert.Equal(t, []time.Duration{MaxDrainTime}, got)
}

// Without rearm, a body that stalls is closed after MaxDrainTime.
func TestDiscardCutsStalledBody(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	start := time.Now()
	Discard(response(pr, -1), nil)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, MaxDrainTime)
	assert.Less(t, took, 10*MaxDrainTime)
	_, err := pw.Write([]byte("x"))
	assert.ErrorIs(t, err, io.ErrClosedPipe, "the body was closed")
}

func TestKeepNilOrEmpty(t *testing.T) {
	assert.True(t, Keep(nil))
	assert.True(t, Keep(response(nil, 0)))
	res := response(http.NoBody, 0)
	assert.True(t, Keep(res))
	assert.Equal(t, http.NoBody, res.Body)
}

func TestKeepReadsShortBodyIntoMemory(t *testing.T) {
	for _, n := range []int{1, 100, MaxKept} {
		for _, cl := range []int64{int64(n), -1} {
			b := newBody(n, nil)
			res := response(b, cl)
			require.True(t, Keep(res), "n=%d cl=%d", n, cl)
			assert.True(t, b.closed.Load(), "the connection's body is closed")
			got, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			assert.Equal(t, strings.Repeat("x", n), string(got))
		}
	}
}

func TestKeepRefusesDeclaredLongBodyUnread(t *testing.T) {
	b := newBody(MaxKept+1, nil)
	res := response(b, MaxKept+1)
	assert.False(t, Keep(res))
	assert.Zero(t, b.read)
	assert.False(t, b.closed.Load())
	assert.Same(t, b, res.Body)
}

// A body found too long, or failing, as it is read is not kept, and reads
// as it would have: the bytes read first, then the rest or the error.
func TestKeepRefusedBodyReadsAsBefore(t *testing.T) {
	failure := errors.New("connection reset")
	tests := []struct {
		name string
		n    int
		err  error
	}{
		{"longer than MaxKept", 3 * MaxKept, nil},
		{"one byte over", MaxKept + 1, nil},
		{"read error", 10, failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBody(tt.n, tt.err)
			res := response(b, -1)
			require.False(t, Keep(res))
			assert.False(t, b.closed.Load())
			got, err := io.ReadAll(res.Body)
			assert.Equal(t, tt.n, len(got))
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
			} else {
				assert.NoError(t, err)
			}
			require.NoError(t, res.Body.Close())
			assert.True(t, b.closed.Load(), "Close reaches the body")
		})
	}
}

// A body that stalls is cut after MaxDrainTime, and not kept.
func TestKeepCutsStalledBody(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("partial")) }()
	start := time.Now()
	res := response(pr, -1)
	assert.False(t, Keep(res))
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, MaxDrainTime)
	assert.Less(t, took, 10*MaxDrainTime)
	got, _ := io.ReadAll(res.Body)
	assert.Equal(t, "partial", string(got), "the bytes read are read again")
}

// Over a real connection, a kept or discarded response lets its connection
// go back to the pool: the next request reuses it.
func TestKeptAndDiscardedResponsesFreeTheirConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, strings.Repeat("busy ", 100))
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	get := func() (*http.Response, bool) {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		res, err := client.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		require.NoError(t, err)
		return res, reused
	}
	res, _ := get()
	require.True(t, Keep(res))
	res2, reused := get()
	assert.True(t, reused, "the kept response's connection was reused")
	Discard(res2, nil)
	res3, reused := get()
	assert.True(t, reused, "the discarded response's connection was reused")
	Discard(res3, nil)
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("busy ", 100), string(got), "the kept body reads in full")
}
