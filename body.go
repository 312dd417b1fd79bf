package retryhttp

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// replayMode says how a request's body is sent again.
type replayMode uint8

const (
	replayNoBody   replayMode = iota // no body: the request is sent as it is
	replayGetBody                    // a fresh body from GetBody per retry
	replayBuffered                   // a fresh reader over buffered bytes per attempt
	replayOnce                       // sent once; the request is not retried
)

// replay produces the request to send on each attempt, with a body reader of
// its own: a reader handed to the base transport is never read again, since
// the base transport of an earlier attempt may still be reading it. The
// caller's request is never modified; attempts that need another body get a
// shallow copy.
type replay struct {
	req  *http.Request
	mode replayMode
	buf  []byte    // replayBuffered: the whole body
	once io.Reader // replayOnce of an overflowing body: buffered prefix + rest

	numbered bool // attempts after the first carry AttemptHeader
}

// newReplay decides how req's body is replayed, buffering it if it has no
// GetBody and might be retried. On error, req.Body has been closed.
func newReplay(req *http.Request, s *settings) (replay, error) {
	r := replay{req: req, numbered: s.attemptHeader}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		r.mode = replayNoBody
	case s.maxRetries == 0 || s.preventRetryWithBody:
		r.mode = replayOnce
	case req.GetBody != nil:
		r.mode = replayGetBody
	case s.bodyBufferLimit <= 0:
		r.mode = replayOnce
	default:
		return r, r.buffer(s.bodyBufferLimit)
	}
	return r, nil
}

// buffer reads up to limit bytes of the body. A body that fits is closed and
// replayed from memory; a larger one is streamed once, prefix then rest.
func (r *replay) buffer(limit int64) error {
	body := r.req.Body
	buf, err := io.ReadAll(io.LimitReader(body, plusOne(limit)))
	if err != nil {
		body.Close()
		return fmt.Errorf("%w: %w", ErrBufferingBody, err)
	}
	if int64(len(buf)) > limit {
		r.mode = replayOnce
		r.once = io.MultiReader(bytes.NewReader(buf), body)
		return nil
	}
	if err := body.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrBufferingBody, err)
	}
	r.mode = replayBuffered
	r.buf = buf
	return nil
}

// replayable reports whether the request may be sent more than once.
func (r *replay) replayable() bool { return r.mode != replayOnce }

// request returns the request for attempt n (1 for the first), numbered
// if the transport numbers attempts.
func (r *replay) request(n int) (*http.Request, error) {
	req, err := r.withReplayedBody(n)
	if err != nil || !r.numbered {
		return req, err
	}
	return r.number(req, n), nil
}

// number returns req, or a copy of it, carrying AttemptHeader as attempt n
// must: n itself after the first, nothing on the first. A first attempt
// that carries no such header, the usual case, is returned as it is.
func (r *replay) number(req *http.Request, n int) *http.Request {
	if n == 1 {
		if _, ok := lookupHeader(req.Header, AttemptHeader); !ok {
			return req
		}
	}
	if req == r.req {
		c := *req
		req = &c
	}
	// Headers of their own: an earlier attempt may still be being sent.
	req.Header = req.Header.Clone()
	if req.Header == nil {
		req.Header = make(http.Header, 1)
	}
	// The caller's own, under any case of its name (h["retry-attempt"]),
	// would be sent beside ours.
	deleteHeader(req.Header, AttemptHeader)
	if n > 1 {
		req.Header[AttemptHeader] = []string{strconv.Itoa(n)}
	}
	return req
}

// withReplayedBody returns the request for attempt n with a body of its
// own.
func (r *replay) withReplayedBody(n int) (*http.Request, error) {
	switch r.mode {
	case replayGetBody:
		if n == 1 {
			return r.req, nil
		}
		body, err := r.req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSeekingBody, err)
		}
		return r.withBody(body), nil
	case replayBuffered:
		buf := r.buf
		req := r.withBody(io.NopCloser(bytes.NewReader(buf)))
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(buf)), nil
		}
		return req, nil
	case replayOnce:
		if r.once != nil {
			return r.withBody(readCloser{r.once, r.req.Body}), nil
		}
	}
	return r.req, nil
}

// withBody returns a shallow copy of the caller's request with another body.
func (r *replay) withBody(body io.ReadCloser) *http.Request {
	req := *r.req
	req.Body = body
	return &req
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// maxDrain bounds how much of a discarded response body is read so that its
// connection can be reused. A longer body costs the connection instead.
const maxDrain = 64 << 10

// maxDrainTime bounds how long draining a discarded response body may take
// when no attempt timeout does. Draining only saves setting up a new
// connection, which takes a few round trips; a body that stalls for longer
// costs the connection instead.
const maxDrainTime = 500 * time.Millisecond

// discard drains a response the caller will never see, up to maxDrain bytes
// and for a bounded time, and closes it.
func discard(res *http.Response) {
	if res == nil || res.Body == nil {
		return
	}
	var once sync.Once
	closeOnce := func() { once.Do(func() { res.Body.Close() }) }
	if b, ok := res.Body.(interface{ rearm(time.Duration) }); ok {
		b.rearm(maxDrainTime) // a body that trickles is cut by the attempt's context
	} else {
		// A body that trickles or stalls is cut by closing it, which
		// unblocks a read in progress.
		timer := time.AfterFunc(maxDrainTime, closeOnce)
		defer timer.Stop()
	}
	if res.ContentLength <= maxDrain { // includes -1, unknown
		// One byte more than the bound, so that a chunked body of exactly
		// maxDrain bytes is read to its end and its connection reused.
		_, _ = io.CopyN(io.Discard, res.Body, maxDrain+1)
	}
	closeOnce()
}

// plusOne returns n+1, or n if that would overflow: the bound of a read that
// must tell "exactly n bytes" from "more than n".
func plusOne(n int64) int64 {
	if n == math.MaxInt64 {
		return n
	}
	return n + 1
}

// closeBody closes the body of a request that will not be sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
