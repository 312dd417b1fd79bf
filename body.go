package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/respbody"
	"github.com/seed2409de8f/retryhttp/internal/teebody"
)

// teeErrors are the errors of a teebody.Body (replayTee), wrapping this
// package's sentinels: a read that needed bytes the copy dropped, and a
// failed read of the caller's body.
var teeErrors = teebody.Errors{
	Overflow:  fmt.Errorf("%w: longer than the body buffer limit", ErrBodyNotReplayable),
	Buffering: ErrBufferingBody,
}

// replayMode says how a request's body is sent again.
type replayMode uint8

const (
	replayNoBody  replayMode = iota // no body: the request is sent as it is
	replayGetBody                   // a fresh body from GetBody per retry
	replayTee                       // streamed once, a copy kept for retries (teebody.go)
	replayOnce                      // sent once; the request is not retried
)

// replay produces the request to send on each attempt, with a body reader of
// its own: a reader handed to the base transport is never read again, since
// the base transport of an earlier attempt may still be reading it. The
// caller's request is never modified; attempts that need another body get a
// shallow copy.
type replay struct {
	req  *http.Request
	mode replayMode
	tee  *teebody.Body // replayTee: the caller's body and its copy

	numbered bool // attempts after the first carry AttemptHeader

	callerAttempt bool // req carries AttemptHeader (headerscan.go)

	// asIs says that the first attempt is req itself (request(1)): no
	// body to replace, no AttemptHeader to number or drop. Set by init.
	asIs bool
}

// init decides how req's body is replayed, keeping a copy of it as it is
// sent if it has no GetBody and might be retried. f holds the facts of
// req's headers. r must be the zero replay: it is made in place.
func (r *replay) init(req *http.Request, s *settings, f *headerFacts) {
	r.req, r.numbered, r.callerAttempt = req, s.attemptHeader, f.attempt
	if req.Body != nil && req.Body != http.NoBody {
		r.choose(s)
	} // else replayNoBody
	r.asIs = r.mode != replayTee && !(r.numbered && r.number(1))
}

// choose sets the mode of a replay of a request with a body.
func (r *replay) choose(s *settings) {
	switch req := r.req; {
	case s.maxRetries == 0 || s.preventRetryWithBody:
		r.mode = replayOnce
	case req.GetBody != nil:
		r.mode = replayGetBody
	case s.bodyBufferLimit <= 0:
		r.mode = replayOnce
	default:
		r.mode, r.tee = replayTee, teebody.New(req.Body, s.bodyBufferLimit, teeErrors)
	}
}

// replayable reports whether the request may be sent again now: its body,
// if any, can be. A streamed body can be once an attempt has begun to read
// it, until it outgrows the buffer limit: before its first attempt, it is
// not known to be (and so it is not hedged: a hedge would need the bytes
// the first attempt has yet to read).
func (r *replay) replayable() bool {
	switch r.mode {
	case replayOnce:
		return false
	case replayTee:
		return r.tee.Started() && r.tee.Replayable()
	}
	return true
}

// mayReplay reports whether the request may be sent more than once at
// all, as known before its first attempt: a streamed body may be.
func (r *replay) mayReplay() bool { return r.mode != replayOnce }

// finish says that no attempt will follow, so that a streamed body is
// closed once the base transport no longer reads it.
func (r *replay) finish() {
	if r.tee != nil {
		r.tee.Finish()
	}
}

// request returns the request for attempt n (1 for the first), with a
// body of its own, numbered if the transport numbers attempts. A first
// attempt whose body needs no replacing and that carries no AttemptHeader,
// the usual case, is the request itself; any other is a shallow copy, made
// in one allocation with the attempt number's value.
func (r *replay) request(n int) (*http.Request, error) {
	if n == 1 && r.asIs {
		return r.req, nil // the usual case, decided by init
	}
	body, err := r.body(n)
	if err != nil {
		return nil, err
	}
	numbered := r.numbered && r.number(n)
	if body == nil && !numbered {
		return r.req, nil
	}
	a := &attemptReq{Request: *r.req}
	if body != nil {
		a.Body = body
		if r.mode == replayTee {
			// net/http may replay the request by itself (after an
			// HTTP/2 GOAWAY, say), from the copy too.
			a.GetBody = r.tee.GetBody
		}
	}
	if numbered {
		// Headers of their own: an earlier attempt may still be being
		// sent. The caller's own AttemptHeader, under any case of its
		// name (h["retry-attempt"]), would be sent beside ours.
		a.Header = cloneHeaderPlus(r.req.Header, AttemptHeader)
		if n > 1 {
			a.value[0] = strconv.Itoa(n)
			a.Header[AttemptHeader] = a.value[:]
		}
	}
	return &a.Request, nil
}

// attemptReq is the request of one attempt, and the value of its
// AttemptHeader, in one allocation.
type attemptReq struct {
	http.Request
	value [1]string
}

// number reports whether attempt n must be numbered: every attempt after
// the first carries AttemptHeader, and a first attempt must not carry the
// caller's.
func (r *replay) number(n int) bool {
	return n > 1 || r.callerAttempt
}

// cloneHeaderPlus returns a copy of h without the header drop (canonical,
// under any case of its name), with room for one more name, so that adding
// it allocates nothing more. Values share one backing array, as with
// http.Header.Clone; nil values stay nil.
func cloneHeaderPlus(h http.Header, drop string) http.Header {
	if len(h) == 0 {
		return make(http.Header, 1) // a constant size: the runtime's cheaper path for small maps
	}
	nv := 0
	for _, vv := range h {
		nv += len(vv)
	}
	sv := make([]string, nv)
	h2 := make(http.Header, len(h)+1)
	for k, vv := range h {
		if drop != "" && len(k) == len(drop) && strings.EqualFold(k, drop) {
			continue
		}
		if vv == nil {
			h2[k] = nil
			continue
		}
		m := copy(sv, vv)
		h2[k] = sv[:m:m]
		sv = sv[m:]
	}
	return h2
}

// body returns the body of attempt n, or nil when the request is sent with
// the caller's body (none, or the first attempt's).
func (r *replay) body(n int) (io.ReadCloser, error) {
	switch r.mode {
	case replayGetBody:
		if n == 1 {
			return nil, nil
		}
		body, err := r.req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSeekingBody, err)
		}
		return body, nil
	case replayTee:
		return r.tee.Reader(), nil
	}
	return nil, nil
}

// discard drains and closes a response the caller will never see
// (respbody.Discard). The body of an attempt with a timeout bounds its own
// drain, with the attempt's timer (cancelBody.rearm, timeout.go).
func discard(res *http.Response) {
	var rearm func(time.Duration)
	if res != nil {
		if b, ok := res.Body.(interface{ rearm(time.Duration) }); ok {
			rearm = b.rearm
		}
	}
	respbody.Discard(res, rearm)
}

// closeBody closes the body of a request that will not be sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
